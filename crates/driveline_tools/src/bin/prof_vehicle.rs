//! Holds a shipped vehicle in a steady state and steps it many times at dt = 1 ms: a target for
//! profilers (`cargo run --release -p driveline_tools --bin prof_vehicle -- sedan_8hp.ron 300000`; under
//! callgrind, `--toggle-collect='*prof_vehicle::measure*'` counts only the measured steps).
//!
//! Automatics (file names containing `8hp`) pull away at 30 % throttle and cruise for 25 s first;
//! a third argument `hold` stands in D on the brakes instead, `upshift` measures the steps of the
//! first full-throttle upshift after 4 s, `upshift_again` those of the same shift after a stop
//! (its modes compiled). Manuals launch in first and shift to third. Prints the time per step, the engaged gear and the
//! solver's counters.

use driveline_core::automatic::Selector;
use driveline_core::{DriverInput, Vehicle};
use std::path::Path;

/// The measured loop, kept out of line so a profiler can isolate it. With `shift`, it stops
/// early when the automatic's shift in progress ends. Returns the steps taken.
#[inline(never)]
fn measure(v: &mut Vehicle, input: &DriverInput, n: usize, shift: bool) -> usize {
    for k in 0..n {
        if shift && v.tcu().is_some_and(|t| t.target().is_none()) {
            return k;
        }
        v.step(input, 1e-3).expect("step");
    }
    n
}

/// Brings `v` to a steady cruise and returns the input that holds it there.
fn warm_up(v: &mut Vehicle, automatic: bool, how: &str) -> DriverInput {
    if automatic {
        let mut input = DriverInput { selector: Selector::Drive, brake: 1.0, ..Default::default() };
        let (seconds, throttle) = if how.starts_with("upshift") { (4_000, 1.0) } else { (25_000, 0.3) };
        for k in 0..seconds {
            if k == 1000 && how != "hold" {
                input.brake = 0.0;
                input.throttle = throttle;
            }
            v.step(&input, 1e-3).expect("step");
        }
        if how.starts_with("upshift") {
            while v.tcu().is_some_and(|t| t.target().is_none()) {
                v.step(&input, 1e-3).expect("step");
            }
        }
        if how == "upshift_again" {
            // Through the first 1-2, to a stop in first, and away again to the same shift: its
            // modes are compiled (as in the `during_upshift_again` bench).
            while v.tcu().is_some_and(|t| t.target().is_some()) {
                v.step(&input, 1e-3).expect("step");
            }
            (input.throttle, input.brake) = (0.0, 1.0);
            for _ in 0..8000 {
                v.step(&input, 1e-3).expect("step");
            }
            (input.throttle, input.brake) = (1.0, 0.0);
            while v.tcu().is_some_and(|t| t.target().is_none()) {
                v.step(&input, 1e-3).expect("step");
            }
        }
        return input;
    }
    let mut input = DriverInput::default();
    for k in 0..9000 {
        let t = k as f64 * 1e-3;
        let shifting = t < 1.0 || (4.0..4.6).contains(&t) || (6.0..6.6).contains(&t);
        input.gear = if t < 4.0 {
            1
        } else if t < 6.0 {
            2
        } else {
            3
        };
        input.shift_up = [0.2, 4.0, 6.0].iter().any(|s| (t - s).abs() < 5e-4);
        input.clutch = if shifting { 1.0 } else { (1.0 - (t - 1.0) / 1.5).clamp(0.0, 1.0) };
        input.throttle = if shifting { 0.0 } else { 0.3 };
        v.step(&input, 1e-3).expect("step");
    }
    input.shift_up = false;
    input
}

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().unwrap_or_else(|| "sedan_8hp.ron".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(300_000);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles").join(&file);
    let mut v = Vehicle::load(&path).expect("vehicle");
    let how = args.next().unwrap_or_default();
    let input = warm_up(&mut v, file.contains("8hp"), &how);
    let before = v.simulation().stats();
    let t0 = std::time::Instant::now();
    let n = measure(&mut v, &input, n, how.starts_with("upshift")).max(1);
    let per_step = t0.elapsed().as_secs_f64() / n as f64 * 1e6;
    let after = v.simulation().stats();
    println!(
        "measured steps: {:.3} sub-steps, {:.3} Newton iterations, {:.4} Jacobians per step",
        (after.substeps - before.substeps) as f64 / n as f64,
        (after.newton_iterations - before.newton_iterations) as f64 / n as f64,
        (after.jacobian_updates - before.jacobian_updates) as f64 / n as f64,
    );
    println!("{per_step:.2} us/step over {n} steps; gear {}; {:?}", v.telemetry().engaged_gear, v.simulation().stats());
    let net = v.simulation().network();
    let varying = net.signals.iter().filter(|s| !matches!(s, driveline_core::Signal::Constant(_))).count();
    println!(
        "network: {} dof ({} nodes), {} laws, {} constraint rows, {} friction elements, {} signals ({} not constant)",
        net.n_dof,
        net.nodes.len(),
        net.laws.len(),
        net.rows.len(),
        net.friction.len(),
        net.signals.len(),
        varying
    );
}
