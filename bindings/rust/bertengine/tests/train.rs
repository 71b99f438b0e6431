//! bertengine (Rust): trains a tiny model, round-trips a checkpoint, drives explicit batches and
//! parameters, and checks that bad input gives an Error with the engine's message.
use bertengine::{Batch, Dist, DistBackend, Error, RankInfo, ReduceOp, Session, Status};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TINY: &str = r#"{"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
  "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
 "train": {"micro_batch": 16, "steps": 80, "lr": 0.02, "threads": 1},
 "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}}"#;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bertengine-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

struct Owned {
    b: usize,
    s: usize,
    p: usize,
    ids: Vec<i32>,
    seg: Vec<i32>,
    mask: Vec<i32>,
    pos: Vec<i32>,
    lm: Vec<i32>,
    nsp: Vec<i32>,
}

impl Owned {
    fn new(b: usize, s: usize, p: usize) -> Owned {
        let mut x: u32 = 7;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            5 + (x >> 16) as i32 % 95
        };
        let ids = (0..b * s).map(|_| next()).collect();
        let seg = (0..b * s).map(|i| ((i % s) * 2 / s) as i32).collect();
        let pos = (0..b * p).map(|i| 1 + 3 * (i % p) as i32).collect();
        let lm = (0..b * p).map(|_| next()).collect();
        let nsp = (0..b).map(|i| (i % 2) as i32).collect();
        Owned {
            b,
            s,
            p,
            ids,
            seg,
            mask: vec![1; b * s],
            pos,
            lm,
            nsp,
        }
    }
    fn batch(&self) -> Batch<'_> {
        Batch {
            batch_size: self.b,
            seq_length: self.s,
            max_predictions: self.p,
            input_ids: &self.ids,
            segment_ids: &self.seg,
            input_mask: &self.mask,
            masked_lm_positions: &self.pos,
            masked_lm_ids: &self.lm,
            next_sentence_labels: &self.nsp,
            ..Default::default()
        }
    }
}

fn mean(x: &[f32]) -> f32 {
    x.iter().sum::<f32>() / x.len() as f32
}

#[test]
fn version_matches_header() {
    assert_eq!(bertengine::api_version(), bertengine_sys::BERT_API_VERSION);
    assert_eq!(bertengine::version().split('.').count(), 3);
}

#[test]
fn training_loss_falls() {
    let mut s = Session::new(TINY).unwrap();
    let mut losses = Vec::new();
    for i in 0..80 {
        let r = s.step(None).unwrap();
        assert_eq!(r.step, i + 1);
        assert_eq!(r.sequences, 16);
        losses.push(r.mlm_loss);
    }
    let drop = mean(&losses[..5]) - mean(&losses[75..]);
    assert!(drop > 0.2, "MLM loss fell by {drop}: {losses:?}");
}

#[test]
fn checkpoint_round_trip_on_another_thread() {
    let path = tmp("ckpt.h5");
    let mut a = Session::new(TINY).unwrap();
    for _ in 0..3 {
        a.step(None).unwrap();
    }
    a.checkpoint(Some(&path)).unwrap();
    let want = a.step(None).unwrap();
    let mut b = Session::new(TINY).unwrap();
    b.load_checkpoint(&path).unwrap();
    // Sessions are Send: the resumed one continues on another thread.
    let got = std::thread::spawn(move || b.step(None).unwrap())
        .join()
        .unwrap();
    assert_eq!(got.step, 4);
    assert_eq!(got.loss, want.loss);
}

#[test]
fn batches_and_parameters() {
    let data = Owned::new(4, 32, 5);
    let mut s = Session::new(TINY).unwrap();
    let fb = s.forward_backward(&data.batch()).unwrap();
    assert!(fb.loss > 0.0);
    let g = s.read_grad("cls.predictions.bias").unwrap();
    assert_eq!(g.len(), 100);
    assert!(g.iter().any(|v| *v != 0.0));
    s.allreduce().unwrap();
    assert_eq!(s.optimizer_step().unwrap().step, 1);

    let mem = s.memory().unwrap();
    assert!(
        mem.parameter_bytes >= 4 * 100 * 32 && mem.activation_bytes > 0,
        "{mem:?}"
    );
    let params = s.params().unwrap();
    assert_eq!(params[0].name, "bert.embeddings.word_embeddings.weight");
    assert_eq!(params[0].shape, vec![100, 32]);
    let w: Vec<f32> = (0..32).map(|i| i as f32).collect();
    s.write_param("bert.pooler.dense.bias", &w).unwrap();
    assert_eq!(s.read_param("bert.pooler.dense.bias").unwrap(), w);

    let ev = s.eval(Some(&data.batch())).unwrap();
    assert_eq!((ev.sequences, ev.masked_tokens), (4, 20));
    let mut x = [1.0f32, 2.0, 3.0];
    s.allreduce_host(&mut x, ReduceOp::Sum).unwrap();
    assert_eq!(x, [1.0, 2.0, 3.0]);
    assert!(s.step(Some(&data.batch())).unwrap().loss.is_finite());
}

fn expect(r: Result<impl std::fmt::Debug, Error>, status: Status, contains: &str) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.status, status, "{e}");
    assert!(
        e.message.contains(contains),
        "{e} does not mention {contains:?}"
    );
}

#[test]
fn bad_input_is_an_error() {
    expect(
        Session::new(r#"{"train": {"lr_typo": 1}}"#),
        Status::Config,
        "lr_typo",
    );
    expect(Session::new("{not json"), Status::Config, "");
    expect(Session::new("{}\0"), Status::InvalidArgument, "NUL");

    let mut s = Session::new(TINY).unwrap();
    let data = Owned::new(4, 32, 5);
    let mut short = data.batch();
    short.input_mask = &data.mask[..10];
    expect(
        s.step(Some(&short)),
        Status::InvalidArgument,
        "input_mask has 10 values, want 128",
    );
    let long = Owned::new(4, 48, 5);
    expect(s.step(Some(&long.batch())), Status::InvalidArgument, "48");
    expect(
        s.write_param("bert.pooler.dense.bias", &[0.0; 31]),
        Status::InvalidArgument,
        "",
    );
    expect(s.read_param("nope"), Status::InvalidArgument, "nope");
    expect(
        s.load_checkpoint(&tmp("missing.h5")),
        Status::Io,
        "missing.h5",
    );
    let e = s.load_checkpoint(&tmp("missing.h5")).unwrap_err();
    assert!(e.to_string().starts_with("BERT_ERR_IO: "), "{e}");
    assert_eq!(s.step(None).unwrap().step, 1); // still usable
}

#[test]
fn abort_from_another_thread() {
    let mut s = Session::new(
        r#"{"model": "bert-tiny", "train": {"micro_batch": 32, "accumulation_steps": 64, "threads": 1},
            "data": {"max_seq_length": 128, "max_predictions_per_seq": 20}}"#,
    )
    .unwrap();
    let h = s.abort_handle();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        h.abort();
    });
    let start = Instant::now();
    expect(s.step(None), Status::Aborted, "");
    assert!(start.elapsed() < Duration::from_secs(5));
    t.join().unwrap();
    s.close();
}

#[test]
fn rank_without_a_distributed_run() {
    let dist = Dist {
        backend: DistBackend::Local,
        ..Dist::default()
    };
    let s = Session::with_dist(TINY, &dist).unwrap();
    let expected = RankInfo {
        rank: 0,
        world_size: 1,
        local_rank: 0,
    };
    assert_eq!(s.rank().unwrap(), expected);
}

#[test]
fn cleared_abort_does_not_stop_the_next_call() {
    let mut s = Session::new(TINY).unwrap();
    let h = s.abort_handle();
    h.abort();
    h.clear();
    assert_eq!(s.step(None).unwrap().step, 1);
    h.abort();
    expect(s.step(None), Status::Aborted, "");
}
