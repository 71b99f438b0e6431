//! bertengine (Rust): a sequence classifier fine-tunes on host batches, `infer` returns its
//! logits and hidden states as `Vec<f32>`, `eval` its task loss and accuracy, an inference session
//! from its checkpoint gives the same logits and evaluation and refuses to train, and bad sizes
//! are errors with the engine's message.
use bertengine::{Batch, Output, Session, Status};

fn config(extra_train: &str, extra_top: &str) -> String {
    format!(
        r#"{{"model": {{"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
  "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64}},
 "task": {{"type": "sequence_classification", "num_labels": 2}},
 "train": {{"micro_batch": 16, "steps": 80, "lr": 0.005, "optimizer": "adamw", "warmup_proportion": 0.1,
            "threads": 1{extra_train}}},
 "data": {{"max_seq_length": 32, "max_predictions_per_seq": 5}}{extra_top}}}"#
    )
}

#[test]
fn fine_tune_and_infer() {
    let (b, s) = (16usize, 32usize);
    let mut ids: Vec<i32> = (0..b * s).map(|i| 10 + (i * 37 % 80) as i32).collect();
    let seg = vec![0i32; b * s];
    let mut mask = vec![1i32; b * s];
    let labels: Vec<i32> = (0..b as i32).map(|i| i % 2).collect();
    for i in 0..b {
        ids[i * s + 2] = 8 - labels[i]; // token 7 at position 2 means label 1
        for t in s - 3..s {
            mask[i * s + t] = 0;
            ids[i * s + t] = 0;
        }
    }
    let mut sess = Session::new(&config("", "")).unwrap();
    let train = Batch {
        batch_size: b,
        seq_length: s,
        input_ids: &ids,
        segment_ids: &seg,
        input_mask: &mask,
        labels: &labels,
        ..Default::default()
    };
    let losses: Vec<f32> = (0..80).map(|_| sess.step(Some(&train)).unwrap().loss).collect();
    assert!((losses[0] - 2f32.ln()).abs() < 0.1 && losses[79] < 0.1, "{losses:?}");
    let input = Batch { labels: &[], ..train };
    let logits = sess.infer(&input, Output::Logits).unwrap();
    assert_eq!(logits.len(), b * 2);
    for i in 0..b {
        assert_eq!(logits[2 * i + 1] > logits[2 * i], labels[i] == 1, "sequence {i}");
    }
    let ev = sess.eval(Some(&train)).unwrap();
    assert!(ev.task_accuracy == 1.0 && ev.task_loss < 0.1 && ev.task_count == 16, "{ev:?}");
    let hidden = sess.infer(&input, Output::Hidden).unwrap();
    assert_eq!(hidden.len(), b * s * 32);
    assert!(hidden[(s - 1) * 32..s * 32].iter().all(|&v| v == 0.0)); // padding position
    let path = std::env::temp_dir().join(format!("bertengine-rs-ft-{}.h5", std::process::id()));
    sess.checkpoint(Some(path.as_ref())).unwrap();

    let mut inf = Session::new(&config(
        &format!(r#", "init_checkpoint": "{}""#, path.display()),
        r#", "mode": "inference""#,
    ))
    .unwrap();
    assert_eq!(inf.infer(&input, Output::Logits).unwrap(), logits);
    assert_eq!(inf.eval(Some(&train)).unwrap(), ev);
    let err = inf.eval(None).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("needs a labelled batch"), "{err}");
    let err = inf.step(Some(&train)).unwrap_err();
    assert_eq!(err.status, Status::Unsupported);
    assert!(err.message.contains("inference"), "{err}");
    let err = inf
        .infer(&Batch { labels: &labels[..3], ..train }, Output::Logits)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("labels has 3 values, want 16 or 512"), "{err}");
    std::fs::remove_file(path).unwrap();
}
