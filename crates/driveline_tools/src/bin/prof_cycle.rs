//! One vehicle (the 8HP sedan by default) driven over UDDS by the driver model, as a vehicle of
//! `driveline bench` is: the wall time of its steps and the solver's counters, second by second
//! of the cycle, so that the phases of a drive cycle that cost the most can be found.
//!
//! `cargo run --release -p driveline_tools --bin prof_cycle -- [offset_s] [seconds] [vehicle]`
//! prints one line per simulated second whose steps took more than twice the median.

use driveline_core::Vehicle;
use driveline_core::vehicle::driver::{Cycle, Driver, DriverParams};
use std::path::Path;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let offset: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(0.0);
    // (At least one second: the median needs one.)
    let seconds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1369).max(1);
    let file = args.get(2).cloned().unwrap_or_else(|| "sedan_8hp.ron".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = match std::fs::read_to_string(root.join("assets/cycles/udds.csv")) {
        Ok(t) => t,
        Err(e) => return eprintln!("udds.csv: {e}"),
    };
    let cycle = match Cycle::parse(&text, "udds") {
        Ok(c) => c,
        Err(e) => return eprintln!("{e}"),
    };
    let mut v = match Vehicle::load(&root.join("assets/vehicles").join(&file)) {
        Ok(v) => v,
        Err(e) => return eprintln!("{e}"),
    };
    let mut driver = Driver::new(v.spec(), DriverParams::default());
    let dt = 1e-3;
    let mut rows = Vec::with_capacity(seconds);
    for s in 0..seconds {
        let before = v.simulation().stats();
        let t0 = Instant::now();
        for _ in 0..1000 {
            let t = v.telemetry();
            let input = driver.input_at(&cycle, cycle.lap(t.time + offset), t, dt);
            if let Err(e) = v.step(&input, dt) {
                return eprintln!("{e}");
            }
        }
        let us = t0.elapsed().as_secs_f64() * 1e3;
        let after = v.simulation().stats();
        let tel = v.telemetry();
        rows.push((s, us, after, before, tel.speed * 3.6, tel.engaged_gear));
    }
    let mut sorted: Vec<f64> = rows.iter().map(|r| r.1).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let total: f64 = sorted.iter().sum();
    println!("{} s: mean {:.2} us/step, median second {median:.2} us/step", rows.len(), total / rows.len() as f64);
    for (s, us, a, b, kmh, gear) in &rows {
        if *us > 2.0 * median {
            println!(
                "t={s:5} s {us:8.2} us/step  {:6.1} km/h gear {gear}  substeps {} newton {} jac {} compiles {} events {} zeno {}",
                kmh,
                a.substeps - b.substeps,
                a.newton_iterations - b.newton_iterations,
                a.jacobian_updates - b.jacobian_updates,
                a.mode_compiles - b.mode_compiles,
                a.state_events - b.state_events,
                a.zeno_guards - b.zeno_guards,
            );
        }
    }
}
