//! Embedding wakeful in a Rust agent: start a monitor, print its events,
//! stop when it ends.
//!
//! ```sh
//! cargo run -p wakeful-engine --example embed -- 'for i in 1 2 3; do echo tick $i; sleep 0.2; done; exit 3'
//! ```

use wakeful_core::MonitorSpec;
use wakeful_engine::{MonitorRegistry, RegistryConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let command = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "for i in 1 2 3; do echo tick $i; sleep 0.2; done".into());
    let registry = MonitorRegistry::new(RegistryConfig::default());
    let mut events = registry.subscribe();
    let started = registry
        .start(MonitorSpec::command(command, "example ticker"))
        .await?;
    println!(
        "started {} (output file {})",
        started.info.id,
        started.info.output_path.display()
    );
    loop {
        let event = events.recv().await?;
        println!("#{} {}: {}", event.seq, event.kind(), event.text);
        if event.kind().is_terminal() {
            break;
        }
    }
    for info in registry.list() {
        println!("{} {:?} {} lines", info.id, info.state, info.lines);
    }
    Ok(())
}
