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

/// Builds and steps a network from scenario text; returns whether every step succeeded. Any
/// outcome but a panic is accepted: a refused build, a step error with the state restored.
fn steps_without_panic(text: &str) -> bool {
    let Ok(sc) = driveline::core::Scenario::parse(text, "t") else { return false };
    let Ok(net) = sc.build(text, "t") else { return false };
    let mut sim = driveline::core::Simulation::new(net);
    (0..200).all(|_| sim.step(1e-3).is_ok())
}

/// Regressions of the fuzzing findings: a singular mode (an absurdly stiff spring, an absurd
/// gear ratio) used to leave stale pivots that a solve indexed out of range.
#[test]
fn absurd_stiffness_or_ratio_never_panics() {
    let two = |coupling: &str| {
        format!(
            r#"Scenario(name: "t", t_end: 1.0, elements: [
                (name: "fixed", kind: Fixed()),
                (name: "motor", kind: Torque(tau: Constant(10.0), use_support: true)),
                (name: "a", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
                (name: "c", kind: {coupling}),
                (name: "b", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
            ], connections: [("motor.flange", "a.flange_a"), ("motor.support", "fixed.flange"),
                ("a.flange_b", "c.flange_a"), ("c.flange_b", "b.flange_a")])"#
        )
    };
    steps_without_panic(&two("SpringDamper(c: 1e300, d: 1.0)"));
    steps_without_panic(&two("IdealGear(ratio: 4294967296.0)"));
}

/// Regressions: vehicle parameters at absurd values (a NaN friction limit reached the box QP's
/// clamp; a wheelbase of 1e-300 made the load transfer infinite).
#[test]
fn absurd_vehicle_parameters_never_panic() {
    let path = root().join("assets/vehicles/nissan_350z.ron");
    let text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in [
        ("rear_brake: 1500.0", "rear_brake: 1e300"),
        ("clamp_force: 9500.0", "clamp_force: 1e30"),
        ("wheelbase: 2.65", "wheelbase: 1e-300"),
    ] {
        assert!(text.contains(from), "{from}");
        let mutated = text.replace(from, to);
        let Ok(spec) = Vehicle::parse(&mutated, "mutated") else { continue };
        let Ok(mut car) = Vehicle::new(spec) else { continue };
        let mut input = driveline::core::DriverInput { clutch: 1.0, gear: 1, brake: 1.0, ..Default::default() };
        for k in 0..3000 {
            if k == 1500 {
                (input.brake, input.throttle, input.clutch) = (0.0, 0.5, 0.0);
            }
            if car.step(&input, 1e-3).is_err() {
                break;
            }
        }
        assert!(car.telemetry().speed.is_finite(), "{to}");
    }
}

/// A vehicle is `Clone`: a game rolls back by keeping a copy, and re-simulating the same frames
/// from it gives the same state bit for bit (here through the 8HP sedan's first upshift and the
/// 350Z's launch, at 60 Hz, where shifts are sub-stepped).
#[test]
fn a_cloned_vehicle_rolls_back_and_resimulates_bit_for_bit() {
    use driveline::core::automatic::Selector;
    for file in ["sedan_8hp.ron", "nissan_350z.ron"] {
        let mut car = Vehicle::load(&root().join("assets/vehicles").join(file)).unwrap();
        let input_at = |k: usize| driveline::core::DriverInput {
            selector: Selector::Drive,
            gear: 1,
            throttle: if k > 30 { 0.8 } else { 0.0 },
            clutch: if k > 60 { 0.0 } else { 1.0 },
            ..Default::default()
        };
        let dt = 1.0 / 60.0;
        let mut k = 0;
        let mut checked = 0;
        while k < 600 {
            // Every 50 frames: keep a copy, step 8 frames, roll back, step them again.
            if k % 50 == 0 {
                let saved = car.clone();
                for j in 0..8 {
                    car.step(&input_at(k + j), dt).unwrap();
                }
                let first = (*car.telemetry(), car.simulation().speeds().to_vec());
                car = saved;
                for j in 0..8 {
                    car.step(&input_at(k + j), dt).unwrap();
                }
                let again = (*car.telemetry(), car.simulation().speeds().to_vec());
                assert_eq!(first.0, again.0, "{file} frame {k}");
                assert!(first.1.iter().zip(&again.1).all(|(a, b)| a.to_bits() == b.to_bits()), "{file} frame {k}");
                checked += 1;
                k += 8;
            } else {
                car.step(&input_at(k), dt).unwrap();
                k += 1;
            }
        }
        assert!(checked >= 10);
        assert!(car.telemetry().speed > 5.0, "{file}: {}", car.telemetry().speed);
    }
}

/// Regressions of the fuzz harness's findings (`driveline_tools::fuzz`): a parameter past its
/// plausible range is refused by `check` at its position, with the range in the message (these
/// values, each accepted before, ran into a non-finite state or a runaway).
#[test]
fn values_past_their_plausible_range_are_refused_with_the_range() {
    let scenario = |file: &str, from: &str, to: &str| {
        let path = root().join("assets/scenarios").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}: {from}");
        let text = text.replace(from, to);
        let err = driveline::core::Scenario::parse(&text, file)
            .and_then(|sc| sc.build(&text, file).map(|_| sc))
            .expect_err(to)
            .to_string();
        assert!(err.contains("plausible range") && err.starts_with(&format!("{file}:")), "{to}: {err}");
    };
    scenario("msl/FirstGrounded.ron", "Damper(d: 10.0)", "Damper(d: 1e30)");
    scenario("msl/First.ron", "Spring(c: 1.0e4", "Spring(c: 1e300");
    scenario("msl/First.ron", "Sine(amplitude: 10.0", "Sine(amplitude: 1e300");
    scenario(
        "msl/SimpleGearShift.ron",
        "Inertia(J: 10.0, phi_start: 0.0, w_start: 0.0)",
        "Inertia(J: 10.0, phi_start: 0.0, w_start: 1000000.0)",
    );
    scenario("elements/TwinBreakaway.ron", "Ramp(height: 60.0", "Ramp(height: 1e300");
    // (Fuzz findings: a lossy gear's efficiency of 1e-300 made its loss torque infinite.)
    scenario("msl/LossyGearDemo1.ron", "loss_table: [(0.0, 0.5, 0.5,", "loss_table: [(0.0, 0.5, 1e-300,");
    // (A fuzz finding: a K-factor of 1e-300 rpm/sqrt(N m) made the converter's torque infinite.)
    scenario("elements/ConverterLockUp.ron", "k_factor: [(0.0, 144.4)", "k_factor: [(0.0, 1e-300)");
    let vehicle = |file: &str, from: &str, to: &str| {
        let path = root().join("assets/vehicles").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}: {from}");
        let text = text.replace(from, to);
        let err =
            Vehicle::parse(&text, file).and_then(|spec| Vehicle::from_text(spec, &text, &path.display().to_string()));
        let err = err.err().unwrap_or_else(|| panic!("{to} was accepted")).to_string();
        assert!(err.contains("plausible range"), "{to}: {err}");
    };
    vehicle("nissan_350z.ron", "wheelbase: 2.65", "wheelbase: 4.8e-6");
    vehicle("nissan_350z.ron", "rear_brake: 1500.0", "rear_brake: 1500000000.0");
    vehicle("nissan_350z.ron", "d: 1.0, e: ", "d: 4294967296.0, e: ");
    vehicle("sedan_8hp.ron", "drag_area: 0.64", "drag_area: 1e300");
}

/// Regression of a fuzz finding: the 350Z rolling at 0.13 m/s in neutral with its engine
/// stalled, brakes and the limited-slip pack releasing at a 1/60 s step, ran away to -11,700
/// m/s in that step (a Newton iteration that did not converge was committed). The sub-step is
/// now cut until one converges; the state the fuzzer saved before that step is replayed.
#[test]
fn a_stiff_release_at_a_game_step_does_not_run_away() {
    let mut car = Vehicle::load(&root().join("assets/vehicles/nissan_350z.ron")).unwrap();
    let text = std::fs::read_to_string(root().join("tests/fixtures/nissan_350z_brakes_release_at_60hz.json")).unwrap();
    let snap: driveline::core::VehicleSnapshot = serde_json::from_str(&text).unwrap();
    car.restore(&snap).expect("the saved state restores");
    let input =
        driveline::core::DriverInput { throttle: 0.9232927574375576, brake: 0.13874920737658725, ..Default::default() };
    for _ in 0..30 {
        car.step(&input, 1.0 / 60.0).unwrap();
        let t = car.telemetry();
        assert!(t.speed.abs() < 0.2 && t.wheel_speed.iter().all(|w| w.abs() < 1.0), "{t:?}");
    }
}

/// The run-time input policy of a plain network: a value past +-1e7 (infinities included) is
/// clamped and taken, NaN is refused and the input keeps its last valid value; each raises one
/// `InputRejected` per episode, readable after the next step.
#[test]
fn a_network_input_past_its_range_is_clamped_and_nan_keeps_the_last_value() {
    let text = r#"Scenario(name: "input", t_end: 1.0, elements: [
            (name: "drive", kind: Torque(tau: Input(name: "tau"))),
            (name: "J", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
        ], connections: [("drive.flange", "J.flange_a")])"#;
    let sc = driveline::core::Scenario::parse(text, "input.ron").unwrap();
    let mut sim = driveline::core::Simulation::new(sc.build(text, "input.ron").unwrap());
    let limit = driveline::core::limits::SIGNAL;
    let k = sim.input_names().iter().position(|n| n == "tau").unwrap();
    // Infinity: clamped, taken, raised once although given three times.
    for _ in 0..3 {
        sim.set_input("tau", f64::INFINITY).unwrap();
    }
    sim.step(1e-3).unwrap();
    let raised = sim.input_rejections().to_vec();
    assert_eq!(raised.len(), 1, "{raised:?}");
    assert_eq!((raised[0].input, raised[0].value, raised[0].used), (k, f64::INFINITY, limit));
    // The torque was the clamped one: w = tau t / J exactly for a constant torque.
    assert!((speed(&sim, "J") - limit * 1e-3).abs() < 1e-9 * limit * 1e-3, "{}", speed(&sim, "J"));
    // The same episode goes on (NaN after a clamped value): nothing new is raised, and the next
    // step drops the old rejection.
    assert!(matches!(sim.set_input("tau", f64::NAN), Err(driveline::core::InputError::NotFinite { .. })));
    sim.step(1e-3).unwrap();
    assert!(sim.input_rejections().is_empty());
    // A valid value ends the episode; NaN then keeps it and opens a new one.
    sim.set_input("tau", 2.0).unwrap();
    sim.step(1e-3).unwrap();
    let w = speed(&sim, "J");
    assert!(sim.set_input("tau", f64::NAN).is_err());
    sim.step(1e-3).unwrap();
    let raised = sim.input_rejections();
    assert_eq!(raised.len(), 1);
    assert!(raised[0].value.is_nan() && raised[0].used == 2.0, "{raised:?}");
    assert!((speed(&sim, "J") - w - 2.0 * 1e-3).abs() < 1e-12, "the last valid torque acted");
    // Past the range on the negative side, by id, after a valid value.
    let id = sim.input_id("tau").unwrap();
    sim.set_input_id(id, 1.0).unwrap();
    sim.set_input_id(id, -1e300).unwrap();
    sim.step(1e-3).unwrap();
    assert_eq!(sim.input_rejections()[0].used, -limit);
}

/// Regression of a fuzz finding: RollingWheel with 1e6 N m against its quadratic drag, from
/// rest at a 1/60 s step. The simplified Newton iteration diverged to NaN, and its norm (a
/// `max` that passes over NaN) read zero: the NaN was taken as converged. A diverged iteration
/// now counts as not converged, the sub-step is cut, and the wheel settles at the speed where
/// the drag balances the torque, 0.4 v^2 = 1e6 N (v = 1581.1 m/s).
#[test]
fn a_newton_iteration_that_diverges_is_cut_not_taken() {
    let text = std::fs::read_to_string(root().join("assets/scenarios/msl/RollingWheel.ron"))
        .unwrap()
        .replace("offset_torque: 0.0", "offset_torque: 1000000.0");
    let sc = driveline::core::Scenario::parse(&text, "RollingWheel.ron").unwrap();
    let mut sim = driveline::core::Simulation::new(sc.build(&text, "RollingWheel.ron").unwrap());
    for _ in 0..60 {
        sim.step(1.0 / 60.0).unwrap();
    }
    // (The terminal speed to the Newton tolerance; the step's torque is 1e6 + 10 after 0.1 s.)
    let v_end = ((1e6f64 + 10.0) / 0.4).sqrt();
    assert!((speed(&sim, "inertia") - v_end).abs() < 1e-6 * v_end, "{}", speed(&sim, "inertia"));
}

/// Regression of six fuzz findings: RollingWheel with a drag a million times the MSL one
/// (`f_nominal: -1e7`, or `v_nominal: 0.001`) at a 1/60 s step. The simplified Newton iteration
/// (its Jacobian taken at rest, where the drag's slope is zero) diverged until the iterate
/// overflowed to infinity, whose relative tolerance `1e-10 (1 + |q|)` is infinite too: the
/// infinite iterate passed it and was committed. An iterate or a correction past any number
/// now stops the iteration as diverged; the sub-step is cut, and the wheel settles where the
/// drag, 4e5 v^2, balances the 10 N of the torque step: v = 0.005 m/s.
#[test]
fn an_iterate_grown_past_any_number_is_not_taken_as_converged() {
    let text = std::fs::read_to_string(root().join("assets/scenarios/msl/RollingWheel.ron"))
        .unwrap()
        .replace("f_nominal: -10.0", "f_nominal: -10000000.0");
    let sc = driveline::core::Scenario::parse(&text, "RollingWheel.ron").unwrap();
    let mut sim = driveline::core::Simulation::new(sc.build(&text, "RollingWheel.ron").unwrap());
    for _ in 0..30 {
        sim.step(1.0 / 60.0).unwrap();
    }
    // (The drag's time constant near the terminal speed is m / (2 k v) = 0.5 ms, 33 times
    // shorter than the step: the Gauss step, A-stable but not L-stable, damps that transient
    // by 0.7 a step, to about 1e-6 of the speed after the 24 steps since the torque step.)
    let v_end = (10.0f64 / 4e5).sqrt();
    assert!((speed(&sim, "mass") - v_end).abs() < 1e-5 * v_end, "{}", speed(&sim, "mass"));
}

/// Regression of a fuzz finding: an inertia of 1e-300 kg m^2 passed `check` and its step went
/// non-finite. A non-zero inertia or mass is now at least `limits::MIN_MASS`.
#[test]
fn a_vanishing_inertia_is_refused() {
    let text = std::fs::read_to_string(root().join("assets/scenarios/msl/Backlash.ron")).unwrap();
    let bad = text.replacen("J: 5.0", "J: 1e-300", 1);
    let sc = driveline::core::Scenario::parse(&bad, "Backlash.ron").unwrap();
    let e = sc.build(&bad, "Backlash.ron").unwrap_err();
    assert!(e.message.contains("at least 1e-12"), "{e}");
    let ok = text.replace("J: 5.0", "J: 1e-12");
    let sc = driveline::core::Scenario::parse(&ok, "Backlash.ron").unwrap();
    let mut sim = driveline::core::Simulation::new(sc.build(&ok, "Backlash.ron").unwrap());
    for _ in 0..60 {
        sim.step(1.0 / 60.0).unwrap();
    }
}

/// `vehicle` in the state `fixture` holds (a snapshot the fuzz harness saved before a step).
fn restore_fixture(vehicle: &str, fixture: &str) -> Vehicle {
    let mut car = Vehicle::load(&root().join("assets/vehicles").join(vehicle)).unwrap();
    let text = std::fs::read_to_string(root().join("tests/fixtures").join(fixture)).unwrap();
    let snap: driveline::core::VehicleSnapshot = serde_json::from_str(&text).unwrap();
    car.restore(&snap).expect("the saved state restores");
    car
}

/// Restores `fixture` (a state the fuzz harness saved before the step that ran away) into
/// `vehicle`, steps it `n` times with `input` at `dt`, and checks that the motion stays where a
/// braked car near standstill can be: under `v_max` m/s, every wheel under 100 rad/s, no
/// Zeno guard.
fn replay_fixture(vehicle: &str, fixture: &str, input: driveline::core::DriverInput, dt: f64, n: usize, v_max: f64) {
    let mut car = restore_fixture(vehicle, fixture);
    let guards = car.simulation().stats().zeno_guards;
    for _ in 0..n {
        car.step(&input, dt).unwrap();
        let t = car.telemetry();
        assert!(t.speed.abs() < v_max && t.wheel_speed.iter().all(|w| w.abs() < 100.0), "{fixture}: {t:?}");
    }
    assert_eq!(car.simulation().stats().zeno_guards, guards, "{fixture}: the Zeno guard was needed");
}

/// Regressions of three fuzz findings, each a runaway near standstill under heavy braking:
/// - the 350Z's braked rear tyre, released by the complementarity solve at an instant whose
///   stage dynamics reversed its slip at once, was selected again and again with no time
///   passing until the Zeno guard stepped it the wrong way (to 104,000 rad/s): a direction
///   the motion keeps reversing is now flipped, then held;
/// - the 350Z's front brake and rolling resistance, a redundant lock pair whose break-away
///   test fired at the instant of its selection again and again (to 580,000 rad/s): the group
///   is trusted for the rest of the step;
/// - the diesel truck at a 79 ms hitch: the way to a located event did not converge from the
///   sub-step's start and was committed (29,000 m/s): it is cut like any other sub-step.
#[test]
fn braked_cars_near_standstill_do_not_run_away() {
    use driveline::core::automatic::Selector;
    let base = driveline::core::DriverInput { selector: Selector::Drive, ..Default::default() };
    let input = driveline::core::DriverInput {
        throttle: 0.32461076664804756,
        brake: 0.7376388591316269,
        clutch: 1e-300,
        starter: true,
        ..base
    };
    replay_fixture("nissan_350z.ron", "nissan_350z_tyre_reverses_at_once_at_60hz.json", input, 1.0 / 60.0, 30, 1.0);
    let input =
        driveline::core::DriverInput { throttle: 0.8264670234885294, brake: 1e6, gear: 1, shift_up: true, ..base };
    replay_fixture("nissan_350z.ron", "nissan_350z_brake_group_at_60hz.json", input, 1.0 / 60.0, 30, 1.0);
    let input = driveline::core::DriverInput { throttle: 0.6179371641466018, brake: 0.8998681046311293, ..base };
    replay_fixture("diesel_truck.ron", "diesel_truck_event_path_diverges.json", input, 0.0788030459365954, 10, 5.0);
}

/// Regression of a fuzz finding (ten cases of 10 million, the 350Z and the race car braked
/// near standstill at 1/60 s): a step whose events used up `max_substeps` went on through the
/// Zeno guard, which committed a Newton iteration that had not converged (to 1.2 million
/// rad/s). The guard now cuts such a sub-step like any other. The state before the step, as
/// the fuzz harness saved it, is replayed: the car stays braked near standstill.
#[test]
fn the_zeno_guard_does_not_commit_a_diverged_iteration() {
    use driveline::core::automatic::Selector;
    let mut car = restore_fixture("nissan_350z.ron", "nissan_350z_zeno_guard_at_60hz.json");
    let input = driveline::core::DriverInput {
        throttle: 0.4046701068707361,
        brake: 0.7484422775868574,
        clutch: 0.8027485835812401,
        selector: Selector::Drive,
        ..Default::default()
    };
    for _ in 0..30 {
        car.step(&input, 1.0 / 60.0).unwrap();
        let t = car.telemetry();
        assert!(t.speed.abs() < 1.0 && t.wheel_speed.iter().all(|w| w.abs() < 100.0), "{t:?}");
    }
}

/// Regression of a fuzz finding: the 350Z stopped with its brakes barely on, in fifth, clutch
/// down, at 1/60 s. The Zeno guard's Newton iteration converged only on nanosecond sub-steps,
/// and the guard took seven million of them (80 s for one step). It now takes at most 64 cut
/// sub-steps, then the rest of the step whole.
#[test]
fn the_zeno_guard_takes_a_bounded_number_of_sub_steps() {
    use driveline::core::automatic::Selector;
    let mut car = restore_fixture("nissan_350z.ron", "nissan_350z_zeno_guard_nanosecond_steps.json");
    let input = driveline::core::DriverInput {
        throttle: 0.8366846500935649,
        brake: 1e-6,
        clutch: 0.9871576932063745,
        gear: 5,
        selector: Selector::Drive,
        ..Default::default()
    };
    let before = car.simulation().stats().zeno_guards;
    car.step(&input, 1.0 / 60.0).unwrap();
    let guarded = car.simulation().stats().zeno_guards - before;
    assert!(guarded <= 200, "{guarded} guarded sub-steps");
    let t = car.telemetry();
    assert!(t.speed.abs() < 0.1 && t.wheel_speed.iter().all(|w| w.abs() < 1.0), "{t:?}");
}

/// Regression of two slow fuzz cases (4.2 s and 2.1 s for a case that takes a millisecond):
/// the 350Z in fifth coasting down the steepest grade allowed (`MAX_GRADE`, 45 degrees), its
/// right rear tyre rolling at its grip limit beside the sliding limited-slip pack. The tyre's
/// break-away test (the mode's own constraint torque, at the limit) fired at the instant of its
/// selection again and again while the complementarity solve, which holds the pack's torque
/// fixed, kept it stuck at two thirds of the limit: 256 sub-steps and a Zeno guard in every
/// millisecond step. After five repeats the lock is now trusted for the rest of the step.
#[test]
fn a_lock_whose_break_away_test_stalls_is_trusted_for_the_step() {
    use driveline::core::automatic::Selector;
    let mut car = restore_fixture("nissan_350z.ron", "nissan_350z_tyre_breakaway_stalls_downhill.json");
    let input = driveline::core::DriverInput {
        throttle: 0.6330207044222834,
        gear: 5,
        shift_down: true,
        selector: Selector::Manual,
        grade: -1e300,
        ..Default::default()
    };
    let before = car.simulation().stats();
    let v0 = car.telemetry().speed;
    let n = 50;
    for _ in 0..n {
        car.step(&input, 1e-3).unwrap();
    }
    let after = car.simulation().stats();
    assert_eq!(after.zeno_guards, before.zeno_guards, "the Zeno guard was needed");
    // (Bound: a step with a break-away and the five stalled repeats takes about eight.)
    let per_step = (after.substeps - before.substeps) as f64 / n as f64;
    assert!(per_step < 10.0, "{per_step} sub-steps a step");
    // Trusting the lock changes the motion by no more than a step's worth: the speed gained
    // in the 50 ms agrees with ten times finer steps to 1 % (the car gains 0.37 m/s).
    let mut fine = restore_fixture("nissan_350z.ron", "nissan_350z_tyre_breakaway_stalls_downhill.json");
    for _ in 0..10 * n {
        fine.step(&input, 1e-4).unwrap();
    }
    let (dv, dv_fine) = (car.telemetry().speed - v0, fine.telemetry().speed - v0);
    assert!((dv - dv_fine).abs() < 0.01 * dv_fine.abs(), "{dv} m/s against {dv_fine} m/s at 0.1 ms");
}

/// The longest piece of each shipped vehicle (`Simulation::max_step`, from the network's
/// fastest linear rate) and how many pieces a 60 Hz frame takes, as the solver docs state them:
/// the 350Z two, the diesel truck two (their clutch dampers and dog clutches are the
/// fastest springs), the two automatics one (no spring: the parameters' 0.05 s).
#[test]
fn each_shipped_vehicle_takes_a_60_hz_frame_in_the_pieces_its_fastest_rate_asks() {
    for (file, pieces) in
        [("nissan_350z.ron", 2.0), ("diesel_truck.ron", 2.0), ("sedan_8hp.ron", 1.0), ("race_sequential.ron", 1.0)]
    {
        let car = Vehicle::load(&root().join("assets/vehicles").join(file)).unwrap();
        let sim = car.simulation();
        let h = sim.max_step();
        assert!(
            (h - (driveline::core::MAX_STEP_TURN / sim.fastest_rate()).clamp(1e-3, 0.05)).abs() < 1e-15,
            "{file}: {h}"
        );
        assert_eq!((1.0 / 60.0 / h).ceil(), pieces, "{file}: {h} s pieces, rate {} /s", sim.fastest_rate());
    }
}

/// Regression of three fuzz findings: SimpleGearShift with its load inertia cut to 3e-12 ..
/// 1e-5 kg m^2 (and the clutch's initial slip changed) ended in a step error.
/// - The load's quadratic drag has zero slope at rest, so the first Newton correction, on the
///   Jacobian at the sub-step start, throws the light load far past its terminal speed; the
///   simplified iteration diverged from there, on every cut. A diverging iteration on a fresh
///   Jacobian now continues as a damped Newton iteration with a Jacobian at each iterate.
/// - With the sun (1 kg m^2) a dependent coordinate, the reduced inertia held the 3e-12 kg m^2
///   load as the small difference of the sun's projected entries: Newton's corrections had a
///   rounding floor of 1e-9 rad/s, above the tolerance. The null space now eliminates the
///   lightest coordinates first.
///
/// Whatever the load's inertia, the motion is the engine's (1 kg m^2; the light loads differ
/// by under 1e-5 of it), so the engine speeds agree to 1e-5.
#[test]
fn a_light_load_under_a_quadratic_drag_steps() {
    let text = std::fs::read_to_string(root().join("assets/scenarios/msl/SimpleGearShift.ron")).unwrap();
    let run = |j: &str, w_rel: &str, dt: f64| {
        let text = text
            .replace("J: 10.0, phi_start", &format!("J: {j}, phi_start"))
            .replace("phi_rel_start: 0.0, w_rel_start: 0.0", &format!("phi_rel_start: 0.0, w_rel_start: {w_rel}"));
        let sc = driveline::core::Scenario::parse(&text, "SimpleGearShift.ron").unwrap();
        let mut sim = driveline::core::Simulation::new(sc.build(&text, "SimpleGearShift.ron").unwrap());
        for k in 0..(3.0 / dt).round() as usize {
            sim.step(dt).unwrap_or_else(|e| panic!("J {j}, w_rel {w_rel}, dt {dt}, step {k}: {e}"));
        }
        speed(&sim, "engine")
    };
    for dt in [1e-3, 1.0 / 60.0, 6.641191371239722e-3] {
        for w_rel in ["0.0", "0.30306156326446065", "-1.0"] {
            let w =
                ["2.9861565682480626e-12", "3.1867019693282086e-10", "9.999999999999999e-6"].map(|j| run(j, w_rel, dt));
            assert!(w[0] > 1.0, "the torque step drives the engine: {w:?}");
            for x in w {
                assert!((x - w[2]).abs() <= 1e-5 * w[2], "dt {dt}, w_rel {w_rel}: {w:?}");
            }
        }
    }
}

/// Regression of a fuzz finding: the race car with its closed-throttle torque at 0 rpm
/// changed from 0 to -1 N m, creeping backward at 3 mm/s in reverse with its clutch slipping,
/// ended a 0.2 s step (a game's hitch) in a step error. Its limited-slip pack chose the
/// power or coast flank by the sign of `T_in w_carrier`: as the carrier's speed crossed zero
/// the limit jumped, Newton's iterates cycled across the jump on every cut, and the Zeno
/// guard committed an unconverged iterate (a runaway). The flank now follows the torque
/// (continuous through standstill), and an iterate that never converges is an error, never
/// committed. The state before the step, as the fuzz harness saved it, is replayed: the car
/// backs away slowly, as 1 ms steps of the same input take it.
#[test]
fn a_hitch_from_a_creep_in_reverse_steps() {
    use driveline::core::automatic::Selector;
    let path = root().join("assets/vehicles/race_sequential.ron");
    let text = std::fs::read_to_string(&path).unwrap().replacen("closed: [0.0,   -10.0,", "closed: [-1.0,   -10.0,", 1);
    let mut car = Vehicle::new(Vehicle::parse(&text, "race_sequential.ron").unwrap()).unwrap();
    let fixture =
        std::fs::read_to_string(root().join("tests/fixtures/race_sequential_negative_closed_throttle_long_step.json"))
            .unwrap();
    car.restore(&serde_json::from_str(&fixture).unwrap()).expect("the saved state restores");
    let input = driveline::core::DriverInput {
        throttle: 0.4458112492108647,
        gear: 2,
        selector: Selector::Park,
        ignition: true,
        ..Default::default()
    };
    let d0 = car.telemetry().distance;
    let mut fine = car.clone();
    car.step(&input, 0.2).expect("the hitch steps");
    for _ in 0..200 {
        fine.step(&input, 1e-3).unwrap();
    }
    let (t, f) = (car.telemetry(), fine.telemetry());
    // (The clutch's actuator moves once per step: over one 0.2 s step it stays at the bite it
    // had, over 1 ms steps it closes, so the two differ in how hard they pull; both back away
    // at walking pace, the engine running.)
    for t in [&t, &f] {
        assert!(t.speed < 0.0 && t.speed > -1.0, "{t:?}");
        assert!((t.distance - d0).abs() < 0.2, "{t:?}");
        assert!(t.engine_rpm > 1000.0 && t.engine_rpm < 6000.0, "{t:?}");
    }
}

/// Regression of three fuzz findings: LossyGearDemo2 with a bearing friction that rises to
/// 1e6 N m at 1 rad/s, on a massless input shaft, at 1/60 s. The motion creeps at 1e-7 rad/s
/// where friction balances the torques, every step meets its events until the Zeno guard
/// takes over, and the guard, without event location, kept a friction sliding after its slip
/// had passed zero: the friction torque then drove the shaft to 8,561 rad/s (later cases
/// ended in a step error instead). A guarded sub-step now ends with a mode selection for
/// every slip that is no longer ahead of its sliding direction. The shaft stays where the
/// friction holds it: past 2e-5 rad/s the friction, 20 N m, exceeds every torque on it.
#[test]
fn the_zeno_guard_does_not_let_a_friction_drive_the_motion() {
    let text = std::fs::read_to_string(root().join("assets/scenarios/msl/LossyGearDemo2.ron"))
        .unwrap()
        .replace("tau_pos: [(0.0, 0.5), (1.0, 1.0)]", "tau_pos: [(0.0, 0.5), (1.0, 1000000.0)]")
        .replace("(name: \"Inertia1\", kind: Inertia(J: 1.0)),", "(name: \"Inertia1\", kind: Inertia(J: 0.0)),");
    let sc = driveline::core::Scenario::parse(&text, "LossyGearDemo2.ron").unwrap();
    let mut sim = driveline::core::Simulation::new(sc.build(&text, "LossyGearDemo2.ron").unwrap());
    for k in 0..30 {
        sim.step(1.0 / 60.0).unwrap_or_else(|e| panic!("step {k}: {e}"));
        assert!(sim.speeds().iter().all(|w| w.abs() < 1e-4), "step {k}: {:?}", sim.speeds());
    }
    assert!(sim.stats().zeno_guards > 0, "the case exercises the guard");
}

/// Regression of a fuzz finding: RollingWheel driven by its quadratic force (a million times
/// the MSL one, pushing) at 1/60 s. A damped Newton iteration that failed left the slot the
/// Jacobian of its last iterate, 1e85 m/s away; the next, shorter sub-step took that huge
/// matrix's tiny corrections (1e-35) for convergence and committed its starting guess: the
/// step booked 80 J of work for 0.15 J of motion. A failed damped iteration now leaves no
/// Jacobian behind, and a correction that grows on a kept Jacobian goes back one iterate to a
/// fresh one. The motion runs to infinity within a few steps (`v' = 2,700 v^2` about): every
/// step taken before the refusal keeps the energy ledger closed.
#[test]
fn a_failed_damped_iteration_leaves_no_jacobian_behind() {
    let text = std::fs::read_to_string(root().join("assets/scenarios/msl/RollingWheel.ron"))
        .unwrap()
        .replace("f_nominal: -10.0", "f_nominal: 10000000.0");
    let sc = driveline::core::Scenario::parse(&text, "RollingWheel.ron").unwrap();
    let mut sim = driveline::core::Simulation::new(sc.build(&text, "RollingWheel.ron").unwrap());
    sim.step(0.10109073900961717).unwrap();
    let mut refused = false;
    for k in 0..12 {
        if let Err(e) = sim.step(1.0 / 60.0) {
            // (The state stays at the last step's end.)
            refused = true;
            assert!(sim.speeds().iter().all(|w| w.is_finite()), "step {k}: {e}");
            break;
        }
        let e = sim.energy().unwrap();
        assert!(e.residual().abs() <= 1e-6 * e.scale() + 1e-9, "step {k}: {e:?}");
    }
    assert!(refused, "the pushing drag runs the wheel to infinity");
}

/// Regression of a fuzz finding: the 350Z with its engine map moved to start at 0 rpm (and a
/// closed-throttle drag of 23,730 N m at 1,600 rpm), its engine stalled at -15 rpm, engaging
/// first gear at a 57 ms step. The map's torque jumped at standstill (none at or below 0 rad/s,
/// the first point's just above), and Newton cycled around the stalled engine until the Zeno
/// guard gave up. A map from 0 rpm now ramps its torque in over the first 10 rpm. The state
/// before the step, as the fuzz harness saved it, is replayed: the engine stays stalled.
#[test]
fn a_stalled_engine_whose_map_starts_at_zero_rpm_steps() {
    use driveline::core::automatic::Selector;
    let text = std::fs::read_to_string(root().join("assets/vehicles/nissan_350z.ron"))
        .unwrap()
        .replacen("rpm:    [1000.0, 1600.0,", "rpm:    [0.0, 1600.0,", 1)
        .replacen("closed: [ -28.1,  -47.3,", "closed: [ -28.1,  -23730.244967207418,", 1);
    let mut car = Vehicle::new(Vehicle::parse(&text, "nissan_350z.ron").unwrap()).unwrap();
    let fixture =
        std::fs::read_to_string(root().join("tests/fixtures/nissan_350z_map_from_zero_rpm_stalled.json")).unwrap();
    car.restore(&serde_json::from_str(&fixture).unwrap()).expect("the saved state restores");
    let input = driveline::core::DriverInput {
        throttle: 0.7655970778996888,
        brake: 0.08477449793879488,
        gear: 1,
        selector: Selector::Neutral,
        ignition: true,
        grade: f64::NAN,
        ..Default::default()
    };
    car.step(&input, 5.7105319741893625e-2).expect("the step converges");
    let t = car.telemetry();
    assert!(t.engine_rpm.abs() < 100.0 && t.speed.abs() < 0.01, "{t:?}");
}
