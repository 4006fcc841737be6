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
//! `prefetch` each thread hints the next vehicle before stepping this one; with `auto` a
//! `HintTuner` decides at each step, as the plugin's fleet step does by default. With `whole`
//! the hints are each vehicle's whole `Vehicle::prefetch` on the next one instead of the
//! plugin's stages (`Vehicle::prefetch_stage`, stage `STAGES - j` on the vehicle `j` ahead).
//! Prints the rate, the wall time per vehicle-step and, as `driveline bench` does, the
//! process's CPU time per vehicle-step (all threads: what the steps took, waits aside).

use driveline_core::automatic::Selector;
use driveline_core::prefetch::HintTuner;
use driveline_core::vehicle::driver::{Cycle, Driver, DriverParams};
use driveline_core::{DriverInput, Vehicle};
use std::path::Path;

/// One sedan of the fleet, with the driver of `traffic` and its offset on the cycle.
struct Car {
    vehicle: Vehicle,
    driver: Driver,
    offset: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let traffic = args.iter().any(|a| a == "traffic");
    let prefetch = args.iter().any(|a| a == "prefetch");
    let whole = args.iter().any(|a| a == "whole");
    // `auto`: each step's pass hints or not as a `HintTuner` decides (the plugin's default).
    let mut tuner = args.iter().any(|a| a == "auto").then(HintTuner::default);
    let mut numbers = args.iter().filter_map(|a| a.parse::<usize>().ok());
    let n = numbers.next().unwrap_or(100).max(1);
    let threads = numbers.next().unwrap_or(2).max(1);
    let steps = numbers.next().unwrap_or(2000).max(1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cycle = match std::fs::read_to_string(root.join("assets/cycles/udds.csv")) {
        Ok(text) => match Cycle::parse(&text, "udds") {
            Ok(c) => c,
            Err(e) => return eprintln!("{e}"),
        },
        Err(e) => return eprintln!("udds.csv: {e}"),
    };
    let mut cars = Vec::with_capacity(n);
    for i in 0..n {
        let vehicle = match Vehicle::load(&root.join("assets/vehicles/sedan_8hp.ron")) {
            Ok(v) => v,
            Err(e) => return eprintln!("{e}"),
        };
        let driver = Driver::new(vehicle.spec(), DriverParams::default());
        cars.push(Car { vehicle, driver, offset: (i as f64 * 37.0) % cycle.duration() });
    }
    let cruise = DriverInput { selector: Selector::Drive, throttle: 0.3, ..Default::default() };
    let dt = 1e-3;
    let cycle = &cycle;
    let step = move |c: &mut Car| {
        let input = if traffic {
            let t = c.vehicle.telemetry();
            c.driver.input_at(cycle, (t.time + c.offset) % cycle.duration(), t, dt)
        } else {
            cruise
        };
        if let Err(e) = c.vehicle.step(&input, dt) {
            eprintln!("{e}");
        }
    };
    let warm = if traffic { 1 } else { 100 };
    for c in cars.iter_mut() {
        (0..warm).for_each(|_| step(c));
    }
    let chunk = n.div_ceil(threads);
    let run = move |part: &mut [Car], prefetch: bool| {
        if prefetch && !whole {
            driveline_core::prefetch::for_each_ahead(part.iter_mut(), |c, stage| c.vehicle.prefetch_stage(stage), step);
            return;
        }
        for k in 0..part.len() {
            if prefetch && let Some(next) = part.get(k + 1) {
                next.vehicle.prefetch();
            }
            step(&mut part[k]);
        }
    };
    // The threads live for the whole run (a thread spawned every step cost about 80 us a
    // step here, which the plugin's task pool does not pay): the calling thread steps the
    // first part, one thread each the others, a barrier before and after every step.
    let hint = std::sync::atomic::AtomicBool::new(false);
    let barrier = std::sync::Barrier::new(threads);
    let mut parts = cars.chunks_mut(chunk);
    let first = parts.next().unwrap_or_default();
    let (start, cpu_start) = (std::time::Instant::now(), driveline_core::process::cpu_seconds());
    std::thread::scope(|s| {
        for part in parts {
            let (hint, barrier) = (&hint, &barrier);
            s.spawn(move || {
                for _ in 0..steps {
                    barrier.wait();
                    run(part, hint.load(std::sync::atomic::Ordering::Relaxed));
                    barrier.wait();
                }
            });
        }
        for _ in 0..steps {
            let prefetch = tuner.as_ref().map_or(prefetch, HintTuner::hints);
            hint.store(prefetch, std::sync::atomic::Ordering::Relaxed);
            let pass = std::time::Instant::now();
            barrier.wait();
            run(first, prefetch);
            barrier.wait();
            if let Some(t) = &mut tuner {
                t.record(pass.elapsed().as_secs_f64() / n as f64);
            }
        }
    });
    let wall = start.elapsed().as_secs_f64();
    let cpu = driveline_core::process::cpu_seconds().zip(cpu_start).map(|(b, a)| (b - a).max(0.0));
    let rate = (n * steps) as f64 / wall;
    let what = if traffic { "in UDDS traffic" } else { "pulling away" };
    let hints = match &tuner {
        Some(t) => format!(", hints {} (auto)", if t.chosen() { "on" } else { "off" }),
        None => String::new(),
    };
    println!(
        "{n} sedans {what} on {threads} thread(s): {rate:.0} vehicle-steps/s, {:.2} us per vehicle-step{hints}",
        1e6 / rate
    );
    // As `driveline bench` prints it: what the threads took, waits for the processor aside.
    if let Some(cpu) = cpu {
        println!("CPU time: {:.2} us per vehicle-step (all threads)", cpu * 1e6 / (n * steps) as f64);
    }
}
