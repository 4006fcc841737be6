//! The fleet without the ECS: `N` 8HP sedans, each a plain [`Vehicle`], stepped at 1 ms and split
//! into `K` contiguous halves (thirds, ...) over `K` scoped threads every step. A baseline for
//! `driveline bench`: what the solver alone reaches on this machine, so the cost of the Bevy
//! App around it (executor, task hand-offs, part write-back) can be read off the difference.
//!
//! `cargo run --release -p driveline_tools --bin fleet_threads -- 400 2 [2000]` (vehicles, threads, steps). The sedans pull
//! away in D at 30 % throttle (not the bench's traffic cycle), after 0.1 s on their own.

use driveline_core::automatic::Selector;
use driveline_core::{DriverInput, Vehicle};
use std::path::Path;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let n = args.next().and_then(Result::ok).unwrap_or(100).max(1);
    let threads = args.next().and_then(Result::ok).unwrap_or(2).max(1);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles/sedan_8hp.ron");
    let mut cars: Vec<Vehicle> = match (0..n).map(|_| Vehicle::load(&path)).collect() {
        Ok(cars) => cars,
        Err(e) => return eprintln!("{e}"),
    };
    let input = DriverInput { selector: Selector::Drive, throttle: 0.3, ..Default::default() };
    let step = |c: &mut Vehicle| {
        if let Err(e) = c.step(&input, 1e-3) {
            eprintln!("{e}");
        }
    };
    for c in cars.iter_mut() {
        (0..100).for_each(|_| step(c));
    }
    let steps = args.next().and_then(Result::ok).unwrap_or(2000).max(1);
    let chunk = n.div_ceil(threads);
    let start = std::time::Instant::now();
    for _ in 0..steps {
        std::thread::scope(|s| {
            for part in cars.chunks_mut(chunk) {
                s.spawn(move || part.iter_mut().for_each(step));
            }
        });
    }
    let wall = start.elapsed().as_secs_f64();
    let rate = (n * steps) as f64 / wall;
    println!("{n} sedans on {threads} thread(s): {rate:.0} vehicle-steps/s, {:.2} us per vehicle-step", 1e6 / rate);
}
