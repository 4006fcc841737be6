//! Step sizes a caller may pass: refused with a typed error when they cannot advance the
//! clock, split into pieces when long, never a panic; the energy ledger says when it is off.

mod common;
use common::*;
use driveline::core::{StepError, Vehicle};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn steps_that_cannot_advance_the_clock_are_refused() {
    let (_, mut sim) = load("CoupledClutches");
    for dt in [0.0, -1e-3, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(matches!(sim.step(dt), Err(StepError::BadStep(_))), "{dt}");
    }
    sim.step(1.0).unwrap();
    // 1 + 1e-300 == 1: the clock would not move.
    assert!(matches!(sim.step(1e-300), Err(StepError::TooShort { .. })));
    assert_eq!(sim.time(), 1.0);
    assert!(matches!(sim.step(1e12), Err(StepError::TooLong { .. })));
    assert_eq!(sim.time(), 1.0);
}

#[test]
fn a_long_step_is_taken_in_pieces_and_lands_where_short_steps_do() {
    // CoupledClutches over 1.5 s: one step against thirty of 50 ms (the longest piece). The
    // pieces' end times are the same to rounding, so the motion agrees to the Newton tolerance.
    let (_, mut long) = load("CoupledClutches");
    let (_, mut short) = load("CoupledClutches");
    long.step(1.5).unwrap();
    for k in 1..=30 {
        short.step(k as f64 * 0.05 - short.time()).unwrap();
    }
    assert!((long.time() - 1.5).abs() < 1e-15);
    for (a, b) in long.speeds().iter().zip(short.speeds()) {
        assert!((a - b).abs() < 1e-9 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn a_vehicle_takes_a_ten_second_hitch_without_a_panic() {
    let path = root().join("assets/vehicles/nissan_350z.ron");
    let mut car = Vehicle::load(&path).unwrap();
    let input = driveline::core::DriverInput { clutch: 1.0, ..Default::default() };
    car.step(&input, 1e-3).unwrap();
    car.step(&input, 10.0).unwrap();
    assert!((car.telemetry().time - 10.001).abs() < 1e-9, "{}", car.telemetry().time);
    assert!(car.telemetry().engine_rpm.is_finite());
}

#[test]
fn the_energy_ledger_says_when_it_is_off() {
    let (_, mut sim) = load("CoupledClutches");
    sim.step(1e-3).unwrap();
    assert!(sim.energy().is_some());
    sim.set_track_energy(false);
    sim.step(1e-3).unwrap();
    assert!(sim.energy().is_none());
    let car = Vehicle::load(&root().join("assets/vehicles/nissan_350z.ron")).unwrap();
    // A vehicle steps without the ledger unless asked.
    assert!(car.simulation().energy().is_none());
}
