//! A profiling target for snapshots: the 8HP sedan mid-launch, snapshot and restore in a loop
//! (`valgrind --tool=callgrind target/release/prof_snapshot [iterations]`).

use driveline_core::automatic::Selector;
use driveline_core::{DriverInput, Vehicle};
use std::path::Path;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles/sedan_8hp.ron");
    let mut v = Vehicle::load(&path).expect("the 8HP sedan");
    let mut input = DriverInput { selector: Selector::Drive, brake: 1.0, ..Default::default() };
    for k in 0..4000 {
        if k == 1000 {
            input.brake = 0.0;
            input.throttle = 0.4;
        }
        v.step(&input, 1e-3).expect("step");
    }
    let start = std::time::Instant::now();
    for _ in 0..n {
        let s = v.snapshot();
        v.restore(std::hint::black_box(&s)).expect("restore");
    }
    println!("snapshot + restore: {:.3} us", start.elapsed().as_secs_f64() * 1e6 / n as f64);
}
