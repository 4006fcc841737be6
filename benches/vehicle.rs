//! Criterion benches of whole vehicles: ns per fixed step of the manual road car (engine,
//! clutch, 6-speed synchromesh box, LSD, four wheels and tyres, body), the race car, and the 8HP
//! sedan (engine, converter with lock-up, 4 planetary sets, 5 shift elements, park pawl, final
//! drive, open diff, wheels, body), cruising and during a clutch-to-clutch shift (the first one
//! of a fresh car, and the same shift of a car that has made it before).
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

/// The 8HP sedan in D: a launch at `throttle` from a standstill in D for `seconds`.
fn sedan_after(seconds: f64, throttle: f64) -> (Vehicle, DriverInput) {
    use driveline::core::automatic::Selector;
    let mut v = car("sedan_8hp.ron");
    let mut input = DriverInput { selector: Selector::Drive, brake: 1.0, ..Default::default() };
    for k in 0..(seconds / 1e-3) as usize {
        if k == 1000 {
            input.brake = 0.0;
            input.throttle = throttle;
        }
        v.step(&input, 1e-3).expect("warm-up step");
    }
    (v, input)
}

fn step_automatic(c: &mut Criterion) {
    let mut g = c.benchmark_group("vehicle_step_1ms");
    g.bench_function("sedan_8hp.ron/cruise_locked_up", |b| {
        let (mut v, input) = sedan_after(25.0, 0.3);
        b.iter(|| v.step(black_box(&input), 1e-3).unwrap())
    });
    // Steps inside the 1-2 full-throttle upshift (fill, torque, inertia and end phases): the
    // window is replayed from a fresh car as often as criterion asks; only the shift's steps
    // are timed.
    g.bench_function("sedan_8hp.ron/during_upshift", |b| {
        b.iter_custom(|iters| time_upshifts(iters, false));
    });
    // The same shift of a car that has made it before (launch, 1-2, brake to a stop, launch
    // again): its modes are compiled, so the figure is what a car pays for every later shift.
    g.bench_function("sedan_8hp.ron/during_upshift_again", |b| {
        b.iter_custom(|iters| time_upshifts(iters, true));
    });
    g.finish();
}

/// Runs the 8HP sedan to the start of its 1-2 full-throttle upshift (`again`: its second one,
/// after a first and a stop in first) and times `iters` of the shift's steps, replaying the
/// shift from a fresh car as often as needed.
fn time_upshifts(iters: u64, again: bool) -> std::time::Duration {
    let to_shift_start = |v: &mut Vehicle, input: &DriverInput| {
        while v.tcu().unwrap().target().is_none() {
            v.step(input, 1e-3).unwrap();
        }
    };
    let mut total = std::time::Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let (mut v, mut input) = sedan_after(4.0, 1.0);
        to_shift_start(&mut v, &input);
        if again {
            while v.tcu().unwrap().target().is_some() {
                v.step(&input, 1e-3).unwrap();
            }
            // Stop, and wait in first.
            (input.throttle, input.brake) = (0.0, 1.0);
            for _ in 0..8000 {
                v.step(&input, 1e-3).unwrap();
            }
            assert_eq!(v.tcu().unwrap().gear(), 1, "stopped in first");
            (input.throttle, input.brake) = (1.0, 0.0);
            to_shift_start(&mut v, &input);
        }
        let t0 = std::time::Instant::now();
        let mut n = 0;
        while left > 0 && v.tcu().unwrap().target().is_some() {
            v.step(black_box(&input), 1e-3).unwrap();
            left -= 1;
            n += 1;
        }
        total += t0.elapsed();
        if n == 0 {
            break;
        }
    }
    total
}

/// A rollback's cost: the 8HP sedan's snapshot, and its restore into the vehicle it was taken
/// of (the state a rollback netcode restores every frame), mid-launch in a gear.
fn snapshot_restore(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot");
    let (mut v, input) = sedan_after(4.0, 0.4);
    g.bench_function("sedan_8hp.ron/snapshot", |b| b.iter(|| black_box(v.snapshot())));
    let snap = v.snapshot();
    g.bench_function("sedan_8hp.ron/restore", |b| b.iter(|| v.restore(black_box(&snap)).unwrap()));
    g.bench_function("sedan_8hp.ron/snapshot_and_restore", |b| {
        b.iter(|| {
            let s = v.snapshot();
            v.restore(black_box(&s)).unwrap()
        })
    });
    // A rollback at 60 Hz: restore, then re-simulate 8 frames.
    g.bench_function("sedan_8hp.ron/restore_and_8_frames_60hz", |b| {
        b.iter(|| {
            v.restore(&snap).unwrap();
            for _ in 0..8 {
                v.step(&input, 1.0 / 60.0).unwrap();
            }
        })
    });
    g.finish();
}

criterion_group!(benches, step_vehicle, step_automatic, snapshot_restore);
criterion_main!(benches);
