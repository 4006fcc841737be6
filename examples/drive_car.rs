//! Headless drives of the shipped vehicles: a launch and shifts in the manual road car, flat-out
//! upshifts in the sequential race car, a hill start in the truck. Prints the located events
//! (synchronisers indexing, dogs dropping in, blocked shifts, shift times) and telemetry.
//!
//! `cargo run --release --example drive_car`

use driveline::core::vehicle::{Telemetry, VehicleEventKind, gear_name};
use driveline::core::{DriverInput, Vehicle};
use std::path::Path;

fn load(file: &str) -> Vehicle {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles").join(file);
    Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn report(v: &Vehicle) {
    for e in v.events() {
        match e.kind {
            VehicleEventKind::InputRejected { .. } => {}
            k => println!("  {:8.4} s  {k}", e.time),
        }
    }
}

fn status(v: &Vehicle) {
    let t = v.telemetry();
    println!(
        "  t {:5.2} s  gear {:>2}  {:5.0} rpm  {:5.1} km/h  clutch {:4.0} N m at {:5.1} C  rear slip {:5.2} m/s",
        t.time,
        gear_name(t.engaged_gear),
        t.engine_rpm,
        // (+ 0.0: a car at rest reads 0.0, not -0.0.)
        t.speed * 3.6 + 0.0,
        t.clutch_torque.abs(),
        t.clutch_temperature,
        t.tyre_slip[2]
    );
}

/// Steps `car` `steps` times at 1 ms, `driver(t, input, telemetry)` setting the input first;
/// prints the events and a status line every second.
fn run(
    car: &mut Vehicle,
    input: &mut DriverInput,
    steps: usize,
    mut driver: impl FnMut(f64, &mut DriverInput, &Telemetry),
) {
    for k in 0..steps {
        let tm = *car.telemetry();
        driver(k as f64 * 1e-3, input, &tm);
        car.step(input, 1e-3).expect("step");
        report(car);
        if k % 1000 == 999 {
            status(car);
        }
    }
}

fn main() {
    println!("== Nissan 350Z: clutch down, first, launch, shift to second and third");
    let mut car = load("nissan_350z.ron");
    let mut input = DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
    run(&mut car, &mut input, 12_000, |t, input, _| {
        let (gear, shift_at) = if t < 5.0 {
            (1, 0.0)
        } else if t < 9.0 {
            (2, 5.0)
        } else {
            (3, 9.0)
        };
        input.gear = gear;
        let since = t - shift_at;
        if gear == 1 {
            input.clutch = if t < 1.2 { 1.0 } else { (1.0 - (t - 1.2) / 1.2).max(0.0) };
            input.throttle = if t < 1.2 { 0.0 } else { 0.35 };
        } else {
            input.clutch = if since < 0.5 { 1.0 } else { (1.0 - (since - 0.5) / 0.3).max(0.0) };
            input.throttle = if since < 0.6 { 0.0 } else { 0.5 };
        }
    });

    println!("== Race car: flat out, ignition-cut upshifts at 6800 rpm (auto-clutch launch)");
    let mut car = load("race_sequential.ron");
    let mut input = DriverInput::default();
    let mut last_shift = -1.0;
    run(&mut car, &mut input, 9000, |t, input, tm| {
        input.throttle = if t > 0.3 { 1.0 } else { 0.0 };
        input.shift_up =
            (t - 0.1).abs() < 5e-4 || (tm.engine_rpm > 6800.0 && tm.engaged_gear > 0 && t - last_shift > 0.3);
        if input.shift_up && t > 0.2 {
            last_shift = t;
        }
    });

    println!("== Diesel truck: held on a 12 % grade by the brakes, then a hill start in first");
    let mut car = load("diesel_truck.ron");
    let mut input = DriverInput { clutch: 1.0, gear: 1, brake: 1.0, grade: 0.12, ..Default::default() };
    run(&mut car, &mut input, 10_000, |t, input, _| {
        if t > 3.0 {
            input.brake = (1.0 - (t - 3.0) / 0.5).max(0.0);
            input.clutch = (1.0 - (t - 2.5) / 2.0).clamp(0.0, 1.0);
            input.throttle = 0.5;
        }
    });
}
