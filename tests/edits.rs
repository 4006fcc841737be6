//! Edits between steps: parameters applied in place with the clock, the motion and the
//! controllers kept; written state, with conflicts resolved to the nearest consistent state.

mod common;
use common::*;
use driveline::core::vehicle::VehicleEventKind;
use driveline::core::{
    DriverInput, ElementKind, ElementSpec, FrictionMode, Network, NetworkSpec, Signal, Simulation, StateWrite,
    StateWriteError, UpdateError, Vehicle,
};
use std::path::Path;

/// A torque source of `tau` N m on an inertia of `j` kg m^2, at rest.
fn flywheel(j: f64, tau: f64) -> NetworkSpec {
    NetworkSpec {
        elements: vec![
            ElementSpec {
                name: "J".into(),
                kind: ElementKind::Inertia { J: j, phi_start: Some(0.0), w_start: Some(0.0) },
            },
            ElementSpec {
                name: "motor".into(),
                kind: ElementKind::Torque { tau: Signal::Constant(tau), use_support: false },
            },
        ],
        connections: vec![("motor.flange".into(), "J.flange_a".into())],
    }
}

/// Two inertias joined by an ideal gear of `ratio`, the first turning at `w0`.
fn geared(ratio: f64, w0: f64) -> NetworkSpec {
    NetworkSpec {
        elements: vec![
            ElementSpec {
                name: "J1".into(),
                kind: ElementKind::Inertia { J: 1.0, phi_start: Some(0.0), w_start: Some(w0) },
            },
            ElementSpec { name: "gear".into(), kind: ElementKind::IdealGear { ratio, use_support: false } },
            ElementSpec {
                name: "J2".into(),
                kind: ElementKind::Inertia { J: 3.0, phi_start: Some(0.0), w_start: None },
            },
        ],
        connections: vec![
            ("J1.flange_b".into(), "gear.flange_a".into()),
            ("gear.flange_b".into(), "J2.flange_a".into()),
        ],
    }
}

fn sim_of(spec: &NetworkSpec) -> Simulation {
    Simulation::new(Network::build(spec).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn an_inertia_edited_in_place_changes_the_acceleration_from_the_next_step_only() {
    // 2 N m on 0.5 kg m^2: 4 rad/s^2, so 4 rad/s after 1 s; then J = 2: 1 rad/s^2, 5 rad/s at
    // 2 s. A constant torque is integrated exactly by the Gauss method: the tolerance is
    // rounding over 120 steps.
    let mut sim = sim_of(&flywheel(0.5, 2.0));
    for _ in 0..60 {
        sim.step(1.0 / 60.0).unwrap();
    }
    let (phi1, w1) = sim.body_state(0).unwrap();
    assert!((w1 - 4.0).abs() < 1e-12, "{w1}");
    sim.update_parameters(&flywheel(2.0, 2.0)).unwrap();
    assert_eq!(sim.body_state(0), Some((phi1, w1)), "the edit itself moves nothing");
    assert!((sim.time() - 1.0).abs() < 1e-12, "the clock runs on");
    for _ in 0..60 {
        sim.step(1.0 / 60.0).unwrap();
    }
    let (phi2, w2) = sim.body_state(0).unwrap();
    assert!((w2 - 5.0).abs() < 1e-12, "{w2}");
    // phi = 2 + 4 + 0.5 = 6.5 rad.
    assert!((phi2 - 6.5).abs() < 1e-10, "{phi2}");
}

#[test]
fn a_structural_change_or_a_bad_value_is_refused_and_leaves_the_simulation_as_it_was() {
    let mut sim = sim_of(&flywheel(0.5, 2.0));
    sim.step(0.1).unwrap();
    let before = sim.body_state(0);
    let mut renamed = flywheel(0.5, 2.0);
    renamed.elements[1].name = "drive".into();
    renamed.connections[0].0 = "drive.flange".into();
    assert!(matches!(sim.update_parameters(&renamed), Err(UpdateError::Structure(_))));
    let err = sim.update_parameters(&flywheel(-1.0, 2.0)).unwrap_err();
    assert!(matches!(err, UpdateError::Build(_)) && err.to_string().contains("`J`"), "{err}");
    assert_eq!(sim.body_state(0), before);
    sim.step(0.1).unwrap();
}

#[test]
fn a_new_gear_ratio_projects_the_speeds_as_an_impact_would() {
    // J1 = 1 at 10 rad/s drives J2 = 3 through ratio 2 (J2 at 5 rad/s). Ratio 4: the speeds
    // must satisfy w1 = 4 w2 with the least mass-weighted change: the momentum conjugate to the
    // joint coordinate, J1 w1 r + J2 w2 = (10 * 4 + 15) kg m^2/s... conserved:
    // w2 = (J1 r w1 + J2 w2) / (J1 r^2 + J2) = (1 * 4 * 10 + 3 * 5) / (16 + 3).
    let mut sim = sim_of(&geared(2.0, 10.0));
    assert!((sim.body_state(2).unwrap().1 - 5.0).abs() < 1e-12);
    sim.update_parameters(&geared(4.0, 10.0)).unwrap();
    let w1 = sim.body_state(0).unwrap().1;
    let w2 = sim.body_state(2).unwrap().1;
    let expect = (4.0 * 10.0 + 3.0 * 5.0) / 19.0;
    assert!((w2 - expect).abs() < 1e-12, "{w2} vs {expect}");
    assert!((w1 - 4.0 * w2).abs() < 1e-12, "the new constraint holds: {w1} vs {}", 4.0 * w2);
    // An impact removes energy, never adds it.
    let ke = 0.5 * (w1 * w1 + 3.0 * w2 * w2);
    assert!(ke < 0.5 * (100.0 + 75.0));
}

#[test]
fn a_written_speed_holds_and_the_rigidly_joined_bodies_follow() {
    let mut sim = sim_of(&geared(2.0, 10.0));
    let report = sim.write_state(&[StateWrite { element: 2, angle: Some(1.0), speed: Some(-7.0) }]).unwrap();
    assert!(report.is_empty(), "{report:?}");
    assert_eq!(sim.body_state(2).unwrap().1, -7.0);
    assert!((sim.body_state(0).unwrap().1 + 14.0).abs() < 1e-12, "J1 follows through the gear");
    assert!((sim.body_state(2).unwrap().0 - 1.0).abs() < 1e-15);
    assert!((sim.body_state(0).unwrap().0 - 2.0).abs() < 1e-12, "and its angle too");
    // The next step starts from the written state (no torque: the speeds hold).
    sim.step(0.01).unwrap();
    assert!((sim.body_state(2).unwrap().1 + 7.0).abs() < 1e-12);
    // Two writes that the gear contradicts: the first holds, the second is reported.
    let report = sim
        .write_state(&[
            StateWrite { element: 0, angle: None, speed: Some(4.0) },
            StateWrite { element: 2, angle: None, speed: Some(5.0) },
        ])
        .unwrap();
    assert_eq!(sim.body_state(0).unwrap().1, 4.0);
    assert_eq!(report.len(), 1, "{report:?}");
    assert_eq!((report[0].element, report[0].written), (2, 5.0));
    assert!((report[0].kept - 2.0).abs() < 1e-12);
}

#[test]
fn bad_writes_are_refused_with_nothing_written() {
    let mut sim = sim_of(&geared(2.0, 10.0));
    let before = sim.speeds().to_vec();
    let e = sim.write_state(&[StateWrite { element: 0, angle: None, speed: Some(f64::NAN) }]).unwrap_err();
    assert!(matches!(e, StateWriteError::NotFinite { .. }), "{e}");
    let e = sim.write_state(&[StateWrite { element: 1, angle: None, speed: Some(1.0) }]).unwrap_err();
    assert!(e.to_string().contains("'gear'"), "{e}");
    assert!(matches!(
        sim.write_state(&[StateWrite { element: 9, angle: None, speed: None }]),
        Err(StateWriteError::NoSuchElement(9))
    ));
    assert_eq!(sim.speeds(), &before[..]);
}

#[test]
fn a_write_across_a_locked_clutch_moves_both_sides_and_keeps_the_lock() {
    // CoupledClutches once clutch1 is stuck. Writing J1's speed a little higher takes J2
    // along (a large change would reverse clutch2's slip and its torque, and break the lock).
    let (_, mut sim) = load("CoupledClutches");
    let c1 = element(&sim, "clutch1");
    while sim.element_mode(c1) != Some(FrictionMode::Stuck) {
        sim.step(1e-3).unwrap();
        assert!(sim.time() < 1.5, "clutch1 never locks");
    }
    for _ in 0..5 {
        sim.step(1e-3).unwrap();
    }
    assert_eq!(sim.element_mode(c1), Some(FrictionMode::Stuck));
    let j1 = element(&sim, "J1");
    let j2 = element(&sim, "J2");
    let target = sim.body_state(j1).unwrap().1 + 0.1;
    sim.write_state(&[StateWrite { element: j1, angle: None, speed: Some(target) }]).unwrap();
    assert!((sim.body_state(j1).unwrap().1 - target).abs() < 1e-12);
    assert!((sim.body_state(j2).unwrap().1 - target).abs() < 1e-12);
    assert_eq!(sim.element_mode(c1), Some(FrictionMode::Stuck));
    sim.step(1e-3).unwrap();
}

fn car(file: &str) -> Vehicle {
    Vehicle::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles").join(file))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The 350Z pulling in first at full throttle, clutch locked.
fn pulling_350z() -> (Vehicle, DriverInput) {
    let mut v = car("nissan_350z.ron");
    let mut input = DriverInput { clutch: 1.0, ..DriverInput::default() };
    for _ in 0..100 {
        v.step(&input, 1e-3).unwrap();
    }
    input.gear = 1;
    for _ in 0..1500 {
        v.step(&input, 1e-3).unwrap();
    }
    assert_eq!(v.engaged_gear(), 1);
    input.throttle = 0.25;
    for k in 0..4000 {
        input.clutch = (1.0 - k as f64 / 3000.0).max(0.0);
        v.step(&input, 1e-3).unwrap();
    }
    input.throttle = 1.0;
    for _ in 0..300 {
        v.step(&input, 1e-3).unwrap();
    }
    assert_eq!(v.clutch_mode(), Some(FrictionMode::Stuck));
    assert!(v.telemetry().running && v.telemetry().speed > 3.0, "{:?}", v.telemetry());
    (v, input)
}

#[test]
fn a_weaker_clutch_on_a_moving_car_slips_within_a_few_steps_with_time_and_speed_carrying_on() {
    let (mut v, input) = pulling_350z();
    let (t0, speed0, gear0) = (v.simulation().time(), v.telemetry().speed, v.engaged_gear());
    let mut spec = v.layout().spec.clone();
    for e in &mut spec.elements {
        if let ElementKind::Clutch { fn_max, .. } = &mut e.kind
            && e.name == "clutch"
        {
            *fn_max *= 0.05;
        }
    }
    v.update_parameters(&spec).unwrap();
    assert_eq!(v.simulation().time(), t0);
    let mut slipped_at = None;
    for k in 1..=20 {
        v.step(&input, 1e-3).unwrap();
        if slipped_at.is_none() && v.clutch_mode() != Some(FrictionMode::Stuck) {
            slipped_at = Some(k);
        }
    }
    let k = slipped_at.expect("the weakened clutch still holds full-throttle torque");
    assert!(k <= 2, "slipped only at step {k}");
    // Nothing else restarted: the gear, the clock and the speed carry on.
    assert_eq!(v.engaged_gear(), gear0);
    assert!((v.simulation().time() - t0 - 0.02).abs() < 1e-12);
    assert!((v.telemetry().speed - speed0).abs() < 0.5, "{} vs {speed0}", v.telemetry().speed);
    assert!(!v.events().iter().any(|e| matches!(e.kind, VehicleEventKind::Stalled)));
}

#[test]
fn a_road_speed_write_sets_body_wheels_and_the_locked_driveline() {
    let (mut v, input) = pulling_350z();
    let tm = *v.telemetry();
    let report = v.set_road_speed(2.0 * tm.speed).unwrap();
    assert!(report.is_empty(), "{report:?}");
    let after = v.telemetry();
    // Written exactly, to the rounding of the projection onto the locks.
    assert!((after.speed - 2.0 * tm.speed).abs() < 1e-12 * tm.speed);
    let r = v.spec().wheels.radius;
    for k in 0..4 {
        assert!((after.wheel_speed[k] * r - 2.0 * tm.speed).abs() < 1e-9, "wheel {k} rolls");
    }
    // Clutch locked, first gear in, the torsional damper and the dogs at rest relative to
    // themselves: the engine turns with the driven wheels at the overall ratio as before
    // (the rear tyres spun before; now they roll, so that ratio is to the rear wheels).
    let ratio = |t: &driveline::core::vehicle::Telemetry| t.engine_rpm / t.wheel_speed[2];
    // (Before, the damper wound at 0.1 rad/s of the engine's 270 rad/s: 4e-4 of the ratio.)
    assert!((ratio(after) / ratio(&tm) - 1.0).abs() < 1e-3, "{} vs {}", ratio(after), ratio(&tm));
    assert!(after.engine_rpm > tm.engine_rpm * 1.4);
    v.step(&input, 1e-3).unwrap();
    assert!((v.telemetry().speed - 2.0 * tm.speed).abs() < 0.05);
}
