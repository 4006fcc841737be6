//! The fleet without the ECS: `N` 8HP sedans, each a plain [`Vehicle`], stepped at 1 ms and split
//! into `K` contiguous halves (thirds, ...) over the calling thread and `K - 1` threads that live
//! for the whole run, a barrier before and after every step. A baseline for
//! `driveline bench`: what the solver alone reaches on this machine, so the cost of the Bevy
//! App around it (executor, task hand-offs, part write-back) can be read off the difference.
//!
//! `cargo run --release -p driveline_tools --bin fleet_threads -- 400 2 [2000] [traffic]`
//! (vehicles, threads, steps). By default the sedans pull away in D at 30 % throttle, after
//! 0.1 s on their own. With `traffic`, the workload of `driveline bench`: each sedan starts at
//! rest and is driven over UDDS by the driver model, vehicle `i` reading the cycle
//! `37 i` seconds ahead, after one step that builds it (the bench's first tick). With
//! `prefetch` each thread hints the next vehicles before stepping one; with `auto` a
//! `HintTuner` decides at each step, as the plugin's fleet step does by default. With `spin=US`
//! the worker threads watch for the next step for `US` microseconds before they sleep
//! ([`Fleet::set_spin`]). The cars step
//! in a [`Fleet`] (`driveline bench --against-core` times the same beside the plugin's fleet).
//! Prints the rate, the wall time per vehicle-step and, as `driveline bench` does, the
//! process's CPU time per vehicle-step (all threads: what the steps took, waits aside).

use driveline_core::automatic::Selector;
use driveline_core::fleet::{Fleet, FleetDrive};
use driveline_core::prefetch::HintPolicy;
use driveline_core::vehicle::driver::Cycle;
use driveline_core::{DriverInput, Vehicle};
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let traffic = args.iter().any(|a| a == "traffic");
    let policy = if args.iter().any(|a| a == "auto") {
        HintPolicy::Auto
    } else if args.iter().any(|a| a == "prefetch") {
        HintPolicy::Always
    } else {
        HintPolicy::Never
    };
    let mut numbers = args.iter().filter_map(|a| a.parse::<usize>().ok());
    let n = numbers.next().unwrap_or(100).max(1);
    let threads = numbers.next().unwrap_or(2).max(1);
    let steps = numbers.next().unwrap_or(2000).max(1) as u64;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cycle = match std::fs::read_to_string(root.join("assets/cycles/udds.csv")) {
        Ok(text) => match Cycle::parse(&text, "udds") {
            Ok(c) => c,
            Err(e) => return eprintln!("{e}"),
        },
        Err(e) => return eprintln!("udds.csv: {e}"),
    };
    let mut cars = Vec::with_capacity(n);
    for _ in 0..n {
        match Vehicle::load(&root.join("assets/vehicles/sedan_8hp.ron")) {
            Ok(v) => cars.push(v),
            Err(e) => return eprintln!("{e}"),
        }
    }
    let cruise = DriverInput { selector: Selector::Drive, throttle: 0.3, ..Default::default() };
    let drive =
        if traffic { FleetDrive::Cycle { cycle: cycle.into(), spacing: 37.0 } } else { FleetDrive::Fixed(cruise) };
    let mut fleet = match Fleet::new(cars, drive, 1e-3) {
        Ok(f) => f,
        Err(e) => return eprintln!("{e}"),
    };
    if let Some(us) = args.iter().find_map(|a| a.strip_prefix("spin=")?.parse::<u64>().ok()) {
        fleet.set_spin(std::time::Duration::from_micros(us));
    }
    fleet.set_hints(policy);
    // Traffic starts at rest after one step (the bench's first tick, which builds the
    // networks); pulling away starts after 0.1 s.
    let warm = if traffic { 1 } else { 100 };
    let mut refused = fleet.run(warm, threads);
    let (start, cpu_start) = (std::time::Instant::now(), driveline_core::process::cpu_seconds());
    refused += fleet.run(steps, threads);
    let wall = start.elapsed().as_secs_f64();
    let cpu = driveline_core::process::cpu_seconds().zip(cpu_start).map(|(b, a)| (b - a).max(0.0));
    if refused > 0 {
        eprintln!("{refused} car-steps refused");
    }
    let rate = (n as u64 * steps) as f64 / wall;
    let what = if traffic { "in UDDS traffic" } else { "pulling away" };
    let hints = match policy {
        HintPolicy::Auto => format!(", hints {} (auto)", if fleet.hinting() { "on" } else { "off" }),
        _ => String::new(),
    };
    println!(
        "{n} sedans {what} on {threads} thread(s): {rate:.0} vehicle-steps/s, {:.2} us per vehicle-step{hints}",
        1e6 / rate
    );
    // As `driveline bench` prints it: what the threads took, waits for the processor aside.
    if let Some(cpu) = cpu {
        println!("CPU time: {:.2} us per vehicle-step (all threads)", cpu * 1e6 / (n as u64 * steps) as f64);
    }
}
