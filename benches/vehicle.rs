//! Criterion benches of whole vehicles: ns per fixed step of the manual road car (engine,
//! clutch, 6-speed synchromesh box, LSD, four wheels and tyres, body) and the race car.
//!
//! Run with `cargo bench --bench vehicle`; CI runs them once as smoke tests and never asserts
//! times.

use criterion::{Criterion, criterion_group, criterion_main};
use driveline::core::{DriverInput, Vehicle};
use std::hint::black_box;
use std::path::Path;

fn car(file: &str) -> Vehicle {
    Vehicle::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles").join(file)).expect("shipped vehicle")
}

/// A car rolling in third gear at part throttle: the steady state a game spends its time in.
/// H-pattern boxes get the lever and the clutch, sequential ones shift-up pulses.
fn cruising(file: &str) -> (Vehicle, DriverInput) {
    let mut v = car(file);
    let mut input = DriverInput::default();
    for k in 0..9000 {
        let t = k as f64 * 1e-3;
        let gear = if t < 4.0 {
            1
        } else if t < 6.0 {
            2
        } else {
            3
        };
        let shifting = t < 1.0 || (4.0..4.6).contains(&t) || (6.0..6.6).contains(&t);
        input.gear = gear;
        input.shift_up = [0.2, 4.0, 6.0].iter().any(|s| (t - s).abs() < 5e-4);
        input.clutch = if shifting { 1.0 } else { (1.0 - (t - 1.0) / 1.5).clamp(0.0, 1.0) };
        input.throttle = if shifting { 0.0 } else { 0.3 };
        v.step(&input, 1e-3).expect("warm-up step");
    }
    input.shift_up = false;
    (v, input)
}

fn step_vehicle(c: &mut Criterion) {
    let mut g = c.benchmark_group("vehicle_step_1ms");
    for file in ["nissan_350z.ron", "race_sequential.ron"] {
        g.bench_function(format!("{file}/cruise"), |b| {
            let (mut v, input) = cruising(file);
            b.iter(|| v.step(black_box(&input), 1e-3).unwrap())
        });
        g.bench_function(format!("{file}/braked_on_grade"), |b| {
            let mut v = car(file);
            let input = DriverInput { brake: 0.6, grade: 0.2, ..Default::default() };
            b.iter(|| v.step(black_box(&input), 1e-3).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, step_vehicle);
criterion_main!(benches);
