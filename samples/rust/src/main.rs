//! bert-train-rs: trains a model from a JSON config through the bertengine crate, prints
//! progress, writes a checkpoint and evaluates.
//!
//!     cargo run --offline --release -- [config.json] [steps] [checkpoint.h5]
//!
//! Without a config it trains a tiny model on the engine's synthetic data.
use std::path::PathBuf;
use std::process::ExitCode;

const TINY: &str = r#"{"model": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2,
  "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64},
 "train": {"micro_batch": 16, "steps": 80, "lr": 0.02, "threads": 1},
 "data": {"max_seq_length": 32, "max_predictions_per_seq": 5}}"#;

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match args.first() {
        Some(path) if path != "-" => std::fs::read_to_string(path)?,
        _ => TINY.to_string(),
    };
    let steps: i64 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(80);
    let ckpt = PathBuf::from(
        args.get(2)
            .map(String::as_str)
            .unwrap_or("bert_train_rs.h5"),
    );

    bertengine::set_log_callback(Some(|level, msg| eprintln!("[engine {level:?}] {msg}")));
    println!("bertengine {}", bertengine::version());
    let mut session = bertengine::Session::new(&config)?;
    for _ in 0..steps {
        let r = session.step(None)?;
        if r.step % 10 == 0 || r.step == steps {
            println!(
                "step {:4}  loss {:.4} (mlm {:.4}, nsp {:.4})  lr {:.5}  {:.0} seq/s",
                r.step, r.loss, r.mlm_loss, r.nsp_loss, r.learning_rate, r.sequences_per_second
            );
        }
    }
    session.checkpoint(Some(&ckpt))?;
    let ev = session.eval(None)?;
    println!(
        "wrote {}; eval mlm accuracy {:.3}, loss {:.3}",
        ckpt.display(),
        ev.mlm_accuracy,
        ev.mlm_loss
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bert-train-rs: {e}");
            ExitCode::FAILURE
        }
    }
}
