//! Element behaviour beyond the MSL examples, against hand calculations: the unified elastic
//! clutch of Hung Nguyen Quang (1998), and run-time inputs.

mod common;
use common::*;
use driveline::core::{Scenario, Signal, Simulation};
use std::path::Path;

fn load_element(name: &str) -> Simulation {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios/elements").join(format!("{name}.ron"));
    let (_, net) = Scenario::load_network(&path).unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(net)
}

#[test]
fn elastic_clutch_slides_at_its_limit_then_sticks_inside_it() {
    let mut sim = load_element("ElasticClutchEngagement");
    let c = element(&sim, "clutch");
    let mut events = Vec::new();
    let mut max_stuck_torque: f64 = 0.0;
    for k in 1..=3000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        events.extend_from_slice(sim.events());
        let t = sim.time();
        if t <= 1.6 {
            // Sliding: constant -50 N m on J1 (J = 1) and +50 N m on J2 (J = 4).
            // Constant accelerations are integrated exactly (to rounding): 1e-9 is rounding margin.
            assert!((speed(&sim, "J1") - (100.0 - 50.0 * t)).abs() < 1e-9, "t {t}");
            assert!((speed(&sim, "J2") - 12.5 * t).abs() < 1e-9, "t {t}");
            assert_eq!(sim.element_torque(c), -50.0);
        } else {
            max_stuck_torque = max_stuck_torque.max(sim.element_torque(c).abs());
        }
    }
    // The speeds meet at 100 / (50 (1 + 1/4)) = 1.6 s; it sticks there and stays stuck.
    assert_eq!(events.len(), 1, "{events:?}");
    assert!((events[0].time - 1.6).abs() < 1e-9, "{}", events[0].time);
    assert_eq!((events[0].from.code(), events[0].to.code()), (-1, 0));
    // Stuck, the shear spring rings down from the limit torque and never exceeds it.
    assert!(max_stuck_torque <= 50.0 + 1e-9, "{max_stuck_torque}");
    // Momentum: 100 kg m^2/s shared by 5 kg m^2 -> mean speed 20 rad/s.
    let p = speed(&sim, "J1") + 4.0 * speed(&sim, "J2");
    assert!((p - 100.0).abs() < 1e-9, "momentum {p}");
    let e = sim.energy().expect("the energy ledger is on");
    assert!(e.residual().abs() < 1e-9 * e.scale(), "ledger residual {}", e.residual());
}

#[test]
fn inputs_change_the_network_at_the_next_step_and_bad_values_are_refused() {
    // A clutch whose normal force is a run-time input, between a driven flywheel and a load.
    let text = r#"Scenario(
        name: "input",
        t_end: 1.0,
        elements: [
            (name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 10.0)),
            (name: "c", kind: Clutch(fn_max: 100.0, f_normalized: Input(name: "pedal"))),
            (name: "J2", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
        ],
        connections: [("J1.flange_b", "c.flange_a"), ("c.flange_b", "J2.flange_a")],
    )"#;
    let sc = Scenario::parse(text, "input.ron").unwrap();
    let mut sim = Simulation::new(sc.build(text, "input.ron").unwrap());
    assert_eq!(sim.input_names(), vec!["pedal".to_string()]);
    sim.step(0.1).unwrap();
    assert_eq!(speed(&sim, "J1"), 10.0, "pedal 0: clutch free");
    sim.set_input("pedal", 1.0).unwrap();
    assert!(sim.set_input("pedal", f64::NAN).is_err());
    assert!(sim.set_input("brake", 1.0).is_err());
    sim.step(0.1).unwrap();
    // Engaged from t = 0.1: 50 N m of sliding torque for 0.1 s.
    assert!((speed(&sim, "J1") - 5.0).abs() < 1e-12);
    assert!((speed(&sim, "J2") - 5.0).abs() < 1e-12);
    // The speeds meet exactly at 0.2 s and the clutch locks there.
    assert_eq!(sim.events().iter().map(|e| (e.from.code(), e.to.code())).collect::<Vec<_>>(), vec![(2, -1), (-1, 0)]);
}

#[test]
fn kinematic_clutch_follows_its_prescribed_ramps() {
    let mut sim = load_element("KinematicClutchShift");
    let c = element(&sim, "clutch");
    let mut events = Vec::new();
    for k in 1..=2000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        events.extend(sim.events().iter().map(|e| (e.time, e.from.code(), e.to.code())));
        let t = sim.time();
        let (_, w_rel) = sim.element_relative(c).unwrap();
        let tau = sim.element_torque(c);
        // Hand calculation (Tiller's kinematic clutch): engaging from 0.1 s the slip -10.5 rad/s falls linearly to
        // zero in 0.5 s; the torque is then -4/3 (21 + 5) = -19.5 N m. Engaged, J2 takes 3/4 of
        // the 5 N m drive: tau = -3.75 N m. Released at 1.0 s, the torque ramps to zero in 0.5 s.
        // Piecewise-linear and constant laws are integrated to rounding: 1e-9 margins.
        if t > 0.1 && t < 0.6 {
            assert!((w_rel - (-10.5 * (1.0 - (t - 0.1) / 0.5))).abs() < 1e-9, "t {t}: {w_rel}");
            assert!((tau + 19.5).abs() < 1e-9, "t {t}: {tau}");
        } else if (0.6..1.0).contains(&t) {
            assert_eq!(w_rel, 0.0, "engaged means exactly no slip");
            assert!((tau + 3.75).abs() < 1e-9, "t {t}: {tau}");
        } else if (1.0..=1.5).contains(&t) {
            assert!((tau - (-3.75 * (1.0 - (t - 1.0) / 0.5))).abs() < 1e-9, "t {t}: {tau}");
        } else if t > 1.5 {
            assert_eq!(tau, 0.0);
        }
    }
    assert_eq!(events, vec![(0.1, 2, -1), (0.6, -1, 0), (1.0, 0, 2)]);
    let e = sim.energy().expect("the energy ledger is on");
    assert!(e.residual().abs() < 1e-9 * e.scale(), "ledger residual {}", e.residual());
}

#[test]
fn speed_source_prescribes_the_motion_exactly() {
    let mut sim = load_element("SpeedSource");
    for k in 1..=2000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        let t = sim.time();
        let (phi, w) = sim.body_state(element(&sim, "rotor")).unwrap();
        let w_ref = 10.0 * (2.0 * std::f64::consts::PI * t).sin();
        let phi_ref = 10.0 / (2.0 * std::f64::consts::PI) * (1.0 - (2.0 * std::f64::consts::PI * t).cos());
        // The speed is imposed exactly; the angle is its order-4 quadrature (error ~1e-13 here).
        assert!((w - w_ref).abs() < 1e-12, "t {t}: {w} vs {w_ref}");
        assert!((phi - phi_ref).abs() < 1e-9, "t {t}: {phi} vs {phi_ref}");
    }
    let e = sim.energy().expect("the energy ledger is on");
    assert!(e.residual().abs() < 1e-9 * e.scale(), "ledger residual {} of {}", e.residual(), e.scale());
}

#[test]
fn sliding_clutch_dissipates_torque_times_slip() {
    let (_, mut sim) = load("CoupledClutches");
    let c = element(&sim, "clutch1");
    for k in 1..=100 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
    }
    let (_, w_rel) = sim.element_relative(c).unwrap();
    let p = sim.element_dissipation(c);
    // Sliding backward at t = 0.1 s: tau = -10 cos(0.04 pi) N m, power tau w_rel >= 0.
    assert!(p > 0.0);
    assert!((p - sim.element_torque(c) * w_rel).abs() < 1e-12 * p, "{p}");
    assert_eq!(sim.element_dissipation(element(&sim, "clutch2")), 0.0, "a free clutch is lossless");
}

#[test]
fn parallel_clutches_share_the_torque_and_slip_together() {
    // Two equal clutches (capacity 10 N m each) between J1 and J2 (1 kg m^2 each), a ramp torque
    // 0 -> 60 N m over 1 s on J1. Locked, the pair transmits half the drive: 30 t N m, split
    // equally (minimum norm), so each carries 15 t and both slip when 15 t = 10, at t = 2/3 s
    // (the located event), not when one alone would (t = 1/3 s).
    let mut sim = load_element("ParallelClutches");
    let (c1, c2) = (element(&sim, "c1"), element(&sim, "c2"));
    let mut events = Vec::new();
    for k in 1..=1000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        events
            .extend(sim.events().iter().map(|e| (e.time, sim.network().elements[e.element].name.clone(), e.to.code())));
        let t = sim.time();
        if t < 0.66 {
            // Both stuck: equal shares of -30 t N m (MSL sign: J2 is driven, tau < 0).
            assert!((sim.element_torque(c1) + 15.0 * t).abs() < 1e-9, "t {t}: {}", sim.element_torque(c1));
            // Equal shares up to the rounding of the minimum-norm solve.
            assert!((sim.element_torque(c1) - sim.element_torque(c2)).abs() < 1e-12 * (1.0 + 15.0 * t));
        }
    }
    assert_eq!(events.len(), 2, "{events:?}");
    for (t, _, to) in &events {
        // A redundant pair is checked as a group against an acceleration threshold of ~1e-9 of
        // the problem's scale (above the regularisation's rounding): ~1e-9 s of event delay.
        assert!((t - 2.0 / 3.0).abs() < 1e-8, "break-away at {t}");
        // J1 is driven and runs ahead: w_rel = w2 - w1 < 0, sliding backward.
        assert_eq!(*to, -1);
    }
}

#[test]
fn simultaneous_break_aways_resolve_as_one_event() {
    // Two clutches on different relative motions reach their limits at the same instant
    // (t = 0.5 s, see the scenario). Resolved one at a time, the second one's event sits at
    // the very start of the next sub-step and the first one locks again: a Zeno chain that
    // only the sub-step guard ends. Resolved together: one event, both slide.
    let mut sim = load_element("TwinBreakaway");
    let (c1, c2) = (element(&sim, "c1"), element(&sim, "c2"));
    let (j1, j2) = (element(&sim, "J1"), element(&sim, "J2"));
    let mut events = Vec::new();
    for k in 1..=1000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        events.extend(sim.events().iter().map(|e| (e.time, e.element, e.to.code())));
        let t = sim.time();
        // Symmetric branches stay symmetric, stuck or sliding.
        let (w1, w2) = (sim.body_state(j1).unwrap().1, sim.body_state(j2).unwrap().1);
        assert!((w1 - w2).abs() <= 1e-12 * (1.0 + w1.abs()), "t {t}: {w1} vs {w2}");
        if t < 0.499 {
            // Stuck: each flywheel takes a third of the drive, 20 t N m (MSL sign: the flywheel
            // is driven, tau < 0).
            assert!((sim.element_torque(c1) + 20.0 * t).abs() < 1e-9 * (1.0 + 20.0 * t), "t {t}");
        } else if t > 0.501 {
            // Sliding: the kinetic torque mu fn = 10 N m each, same sign.
            assert!((sim.element_torque(c1) + 10.0).abs() < 1e-9, "t {t}: {}", sim.element_torque(c1));
            assert!((sim.element_torque(c2) + 10.0).abs() < 1e-9, "t {t}: {}", sim.element_torque(c2));
        }
    }
    let stats = sim.stats();
    assert_eq!(stats.zeno_guards, 0, "{stats:?}");
    // Two mode changes (one per clutch), both at the located instant; the hub runs ahead of the
    // flywheels it drives: w_rel = w_b - w_a < 0, sliding backward.
    assert_eq!(events.len(), 2, "{events:?}");
    let mut who: Vec<usize> = events.iter().map(|e| e.1).collect();
    who.sort_unstable();
    assert_eq!(who, vec![c1.min(c2), c1.max(c2)]);
    for (t, _, to) in &events {
        // Located on the collocation polynomial: the event time tolerance, far below 1e-8 s.
        assert!((t - 0.5).abs() < 1e-8, "break-away at {t}");
        assert_eq!(*to, -1);
    }
}

#[test]
fn position_source_prescribes_angle_and_speed() {
    let mut sim = load_element("PositionSource");
    let w = 4.0 * std::f64::consts::PI;
    for k in 1..=1000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        let t = sim.time();
        let (phi, speed) = sim.body_state(element(&sim, "rotor")).unwrap();
        // Speed imposed exactly (rounding); angle by order-4 quadrature of it (~1e-12 here).
        assert!((speed - 0.5 * w * (w * t).cos()).abs() < 1e-12, "t {t}");
        assert!((phi - 0.5 * (w * t).sin()).abs() < 1e-9, "t {t}: {phi}");
    }
    let e = sim.energy().expect("the energy ledger is on");
    assert!(e.residual().abs() < 1e-9 * e.scale(), "ledger residual {}", e.residual());
}

/// A torque source `tau` (with `INPUTS` replaced by `n` copies of the input `name`) on 1 kg m^2
/// spinning at 3 rad/s.
fn overflow_scenario(tau: &str, name: &str, n: usize) -> String {
    let inputs = vec![format!("Input(name: \"{name}\")"); n].join(", ");
    let tau = tau.replace("INPUTS", &inputs);
    format!(
        r#"Scenario(
        name: "overflow",
        t_end: 1.0,
        elements: [
            (name: "drive", kind: Torque(tau: {tau})),
            (name: "J", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 3.0)),
        ],
        connections: [("drive.flange", "J.flange_a")],
    )"#
    )
}

#[test]
fn a_non_finite_state_is_refused_and_rolled_back() {
    // Run-time inputs whose product overflows: the torque becomes infinite at t = 0.5 s (a
    // file cannot say it: `check` refuses a signal value past 1e7, and the input policy clamps
    // each input to it; 45 of them multiplied pass 1e308). The step that meets it reports an
    // error and leaves the last finite state.
    let text = overflow_scenario("Product([Step(height: 1.0, start_time: 0.5), INPUTS])", "a", 45);
    let sc = Scenario::parse(&text, "overflow.ron").unwrap();
    let mut sim = Simulation::new(sc.build(&text, "overflow.ron").unwrap());
    sim.set_input("a", 1.0e7).unwrap();
    for k in 1..=499 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
    }
    let t = sim.time();
    let err = sim.step(2e-3).unwrap_err();
    assert!(matches!(err, driveline::core::StepError::NonFinite { .. }), "{err}");
    assert!(err.to_string().contains("in J;"), "the body is named: {err}");
    assert_eq!(sim.time(), t, "the clock is rolled back");
    assert_eq!(speed(&sim, "J"), 3.0, "the last finite state is kept");
    assert!(sim.speeds().iter().all(|v| v.is_finite()));
}

#[test]
fn a_non_finite_state_is_refused_in_a_time_only_step_too() {
    // A torque source on an inertia steps in the time-only kernel; 1e307 N m (the product of 44
    // run-time inputs, each within the input policy's 1e7: a file cannot say it) on 1 kg m^2:
    // the angle, 5e306 t^2, overflows near t = 6 s. The kernel refuses to commit a non-finite
    // state (from t = 5.1 s, where the sum of angle and speed it tests overflows first, it hands
    // every step to the general path), the general path reports the overflow, and the state
    // stays.
    let text = overflow_scenario("Product([INPUTS])", "tau", 44);
    let sc = Scenario::parse(&text, "overflow.ron").unwrap();
    let mut sim = Simulation::new(sc.build(&text, "overflow.ron").unwrap());
    sim.set_input("tau", 1e307f64.powf(1.0 / 44.0)).unwrap();
    let err = loop {
        let (t, w) = (sim.time(), speed(&sim, "J"));
        match sim.step(1e-3) {
            Ok(()) => assert!(sim.time() < 100.0, "no overflow by {}", sim.time()),
            Err(e) => {
                assert_eq!((sim.time(), speed(&sim, "J")), (t, w), "the last finite state is kept");
                break e;
            }
        }
    };
    assert!(matches!(err, driveline::core::StepError::NonFinite { .. }), "{err}");
    assert!(sim.stats().time_only_substeps > 5_000, "{:?}", sim.stats());
    assert!(sim.speeds().iter().chain(sim.angles()).all(|v| v.is_finite()));
}

#[test]
fn converter_at_stall_settles_where_the_k_factor_says() {
    // 200 N m into the pump, the turbine held: the pump runs up until (w / K(0))^2 = 200 N m,
    // and the held turbine feels TR(0) = 2 times that (ADVISOR 144K: K(0) = 144.4 rpm/sqrt(N m)).
    let text = r#"Scenario(
        name: "stall",
        t_end: 4.0,
        elements: [
            (name: "engine", kind: ConstantTorque(tau_constant: 200.0)),
            (name: "pump", kind: Inertia(J: 0.3, phi_start: 0.0, w_start: 100.0)),
            (name: "tc", kind: TorqueConverter(map: (
                k_factor: [(0.0, 144.4), (0.5, 163.7), (0.9, 227.2), (0.95, 304.4), (1.0, 304.5)],
                torque_ratio: [(0.0, 2.0), (0.5, 1.43), (0.9, 1.0), (1.0, 1.0)],
            ))),
            (name: "housing", kind: Fixed()),
        ],
        connections: [("engine.flange", "pump.flange_a"), ("pump.flange_b", "tc.pump"), ("tc.turbine", "housing.flange")],
    )"#;
    let sc = Scenario::parse(text, "stall.ron").unwrap();
    let mut sim = Simulation::new(sc.build(text, "stall.ron").unwrap());
    for k in 1..=4000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
    }
    let w_stall = 144.4 * 200f64.sqrt() * std::f64::consts::PI / 30.0;
    // Time constant J / (2 w / K^2) = 0.16 s: after 25 of them the transient is gone; what is
    // left is the Newton tolerance (1e-10 relative), so 1e-9 relative gives it a factor 10.
    let w = speed(&sim, "pump");
    assert!((w - w_stall).abs() < 1e-9 * w_stall, "pump {w} rad/s, expected {w_stall}");
    let tc = element(&sim, "tc");
    assert!((sim.element_torque(tc) - 400.0).abs() < 1e-6, "turbine torque {}", sim.element_torque(tc));
    // All 200 N m of input power is heat in the oil.
    let e = sim.energy().expect("the energy ledger is on");
    assert!(e.residual().abs() < 1e-9 * e.scale(), "ledger residual {}", e.residual());
}

#[test]
fn lock_up_clutch_locks_pump_and_turbine_exactly() {
    let mut sim = load_element("ConverterLockUp");
    let lockup = element(&sim, "lockup");
    let mut events = Vec::new();
    let mut ratio_at = Vec::new();
    for k in 1..=6000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        events.extend_from_slice(sim.events());
        if k % 1000 == 0 {
            ratio_at.push(speed(&sim, "turbine") / speed(&sim, "pump"));
        }
    }
    // Converter only up to 4 s: the speed ratio climbs but stays below 1 (no torque at SR 1).
    assert!(ratio_at.windows(2).take(3).all(|r| r[1] > r[0]), "{ratio_at:?}");
    assert!(ratio_at[3] < 0.99, "{ratio_at:?}");
    // The clutch engages from 4 s, slips, sticks once and stays stuck: zero slip to rounding.
    let stuck: Vec<_> = events.iter().filter(|e| e.element == lockup && e.to.code() == 0).collect();
    assert_eq!(stuck.len(), 1, "{events:?}");
    assert!(stuck[0].time > 4.0 && stuck[0].time < 5.0, "{}", stuck[0].time);
    let slip = speed(&sim, "turbine") - speed(&sim, "pump");
    assert!(slip.abs() < 1e-9, "locked slip {slip}");
    let e = sim.energy().expect("the energy ledger is on");
    assert!(e.residual().abs() < 1e-9 * e.scale(), "ledger residual {}", e.residual());
}

#[test]
fn a_sine_carried_from_step_to_step_stays_on_its_direct_evaluation() {
    // A sine torque on a flywheel, and a step torque on a second one whose start (12.3456 s)
    // splits a step: the sub-steps around it change `h`. The solver carries the sine's phase
    // from one sub-step's end to the next by rotation and evaluates it afresh every 256
    // sub-steps; the torque it reports at each step end must equal `Signal::eval` there.
    let text = r#"Scenario(
        name: "sine",
        t_end: 30.0,
        signals: { "s": Sine(amplitude: 10.0, f: 5.0, phase: 0.3, offset: 1.0, start_time: 0.0105) },
        elements: [
            (name: "fixed", kind: Fixed()),
            (name: "src", kind: Torque(tau: Ref("s"), use_support: true)),
            (name: "J", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 0.0)),
            (name: "kick", kind: Torque(tau: Step(height: 1.0, start_time: 12.3456), use_support: true)),
            (name: "J2", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
        ],
        connections: [
            ("src.support", "fixed.flange"), ("src.flange", "J.flange_a"),
            ("kick.support", "fixed.flange"), ("kick.flange", "J2.flange_a"),
        ],
    )"#;
    let sc = Scenario::parse(text, "sine.ron").unwrap();
    let mut sim = Simulation::new(sc.build(text, "sine.ron").unwrap());
    let src = element(&sim, "src");
    let sine = Signal::Sine { amplitude: 10.0, f: 5.0, phase: 0.3, offset: 1.0, start_time: 0.0105 };
    let mut worst: f64 = 0.0;
    for k in 1..=30_000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        let direct = sine.eval_left(sim.time());
        worst = worst.max((sim.element_torque(src).abs() - direct.abs()).abs());
    }
    // At t = 30 s the phase 2 pi f t = 942 rad is itself known to about 1e-13 rad in f64; 256
    // rotations add a few ulps. 1e-11 N m (1e-12 of the amplitude) covers both; a wrong
    // rotation or a phase carried across a changed sub-step would be off by far more.
    assert!(worst < 1e-11, "sine off its direct evaluation by {worst:e} N m");
    assert!(sim.stats().substeps > 30_000, "the step source split a step");
}

/// Runs a scenario text at fixed steps `dt` for `t_end`; returns the first `count` mode changes
/// as `(element, from, to, time)`.
fn first_events(text: &str, dt: f64, t_end: f64, count: usize) -> Vec<(String, i32, i32, f64)> {
    let sc = Scenario::parse(text, "case.ron").unwrap();
    let mut sim = Simulation::new(sc.build(text, "case.ron").unwrap());
    let mut out = Vec::new();
    let steps = (t_end / dt).round() as usize;
    for k in 1..=steps {
        sim.step(k as f64 * dt - sim.time()).unwrap();
        for e in sim.events() {
            out.push((sim.network().elements[e.element].name.clone(), e.from.code(), e.to.code(), e.time));
        }
    }
    out.truncate(count);
    out
}

/// A scenario whose driven part (`front` elements and connections, ending at inertia `last`)
/// turns a 1 kg m^2 flywheel `J` through clutch `c1` (mu 0.5, fn_max 20 N, peak 1: a 10 N m
/// static limit), all starting at `w0`. A small quadratic load on `J` keeps every mode off the
/// time-only kernel, on the general path whose break-away screen may skip stage samples when
/// the step ends look safe.
fn behind_a_clutch(front: &str, front_connections: &str, last: &str, w0: f64) -> String {
    format!(
        r#"Scenario(
        name: "case",
        t_end: 0.1,
        elements: [
            {front}
            (name: "c1", kind: Clutch(fn_max: 20.0, f_normalized: Constant(1.0))),
            (name: "J", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: {w0:?})),
            (name: "load", kind: QuadraticSpeedDependentTorque(tau_nominal: -0.01, w_nominal: 10.0)),
        ],
        connections: [
            {front_connections}
            ("{last}.flange_b", "c1.flange_a"), ("c1.flange_b", "J.flange_a"), ("J.flange_b", "load.flange"),
        ],
    )"#
    )
}

/// A lock between two flywheels, driven by a 60 Hz torque of 60 N m: the clutch must carry 30 N
/// m at the crests, over its 10 N m static limit, so it breaks away within the first
/// millisecond. At 60 Hz steps the torque is zero at every step end (`sin 2 pi k = 0`): only the
/// stage samples see it.
#[test]
fn a_pulsating_torque_breaks_away_between_step_ends() {
    let text = behind_a_clutch(
        r#"(name: "drive", kind: Torque(tau: Sine(amplitude: 60.0, f: 60.0))),
            (name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 1.0)),"#,
        r#"("drive.flange", "J1.flange_a"),"#,
        "J1",
        1.0,
    );
    let reference = first_events(&text, 1e-4, 0.05, 1);
    let coarse = first_events(&text, 1.0 / 60.0, 0.05, 1);
    // The break-away: 30 sin(2 pi 60 t) reaches 10 N m at t = asin(1/3) / (2 pi 60) = 0.9 ms
    // (the quadratic load's 1e-4 N m moves it by 1e-8 s).
    assert_eq!(reference.len(), 1, "{reference:?}");
    assert_eq!((reference[0].1, reference[0].2), (0, -1), "{reference:?}");
    let analytic = (1.0f64 / 3.0).asin() / (2.0 * std::f64::consts::PI * 60.0);
    assert!((reference[0].3 - analytic).abs() < 1e-6, "{reference:?} vs {analytic}");
    // At 60 Hz steps: the same break-away, located inside the first step to the event
    // tolerance's scale (the crossing is found on the collocation polynomial: 1e-6 s).
    assert_eq!(coarse.len(), 1, "missed at 60 Hz steps: {coarse:?}");
    assert_eq!((coarse[0].1, coarse[0].2), (0, -1));
    assert!((coarse[0].3 - analytic).abs() < 1e-6, "{coarse:?} vs {analytic}");
}

/// A preloaded shaft spring (c = 1e4 N m/rad between 1 kg m^2 flywheels: 19.5 Hz, `omega h` =
/// 2 at 60 Hz steps) rings behind a clutch that first slides, then sticks and must break away
/// forward when the ring swings back. At 60 Hz steps the step ends of the stuck phase leave the
/// lock with a quarter of its limit to spare while the stages do not: skipping the stage samples
/// there had the clutch break away backwards 27 ms late.
#[test]
fn a_ringing_shaft_breaks_away_between_step_ends() {
    let text = behind_a_clutch(
        r#"(name: "J0", kind: Inertia(J: 1.0, phi_start: 0.0024, w_start: 0.0)),
            (name: "spring", kind: Spring(c: 1e4)),
            (name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),"#,
        r#"("J0.flange_b", "spring.flange_a"), ("spring.flange_b", "J1.flange_a"),"#,
        "J1",
        0.0,
    );
    let reference = first_events(&text, 1e-5, 0.05, 2);
    let coarse = first_events(&text, 1.0 / 60.0, 0.05, 2);
    let modes = |e: &[(String, i32, i32, f64)]| e.iter().map(|e| (e.1, e.2)).collect::<Vec<_>>();
    // Sliding backwards from the start, stuck at about 8 ms, breaking away forward at 21 ms.
    assert_eq!(modes(&reference), vec![(-1, 0), (0, 1)], "{reference:?}");
    assert_eq!(modes(&coarse), modes(&reference), "at 60 Hz steps: {coarse:?}");
    // A 19.5 Hz ring is resolved by about three steps a period at 60 Hz: the instants carry the
    // integration error of that resolution (here 1 ms), not the event location's.
    for (c, r) in coarse.iter().zip(&reference) {
        assert!((c.3 - r.3).abs() < 2e-3, "{coarse:?} vs {reference:?}");
    }
}

/// A torque input stepped at a step start against a lock whose torque then relaxes within a
/// millisecond (a stiff damper to the housing on the driving side): at the step start the
/// clutch must carry `J2 tau / (J1 + J2)` = 27.3 N m, nearly three times its 10 N m limit, and
/// breaks away there (MSL: the modes are re-evaluated at the discontinuity). J1 settles within
/// 0.1 ms at `d w1 = tau - 10`, J2 gains 10 rad/s^2 from the limit torque, and the
/// speeds meet after 2 ms, where the lock needs `10 J2 / (J1 + J2)` = 9.1 N m: it sticks again.
/// Held, the lock's torque relaxes with `(J1 + J2) / d` = 1.1 ms, before the first stage of a
/// 60 Hz step (3.5 ms): only a test at the step start sees the excess.
#[test]
fn an_input_step_over_the_limit_breaks_away_at_the_step_start() {
    let text = r#"Scenario(
        name: "input_step",
        t_end: 1.0,
        elements: [
            (name: "fixed", kind: Fixed()),
            (name: "drive", kind: Torque(tau: Input(name: "tq"))),
            (name: "J1", kind: Inertia(J: 0.1, phi_start: 0.0, w_start: 0.0)),
            (name: "damper", kind: Damper(d: 1000.0)),
            (name: "c1", kind: Clutch(fn_max: 20.0, f_normalized: Constant(1.0))),
            (name: "J2", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
        ],
        connections: [
            ("drive.flange", "J1.flange_a"), ("fixed.flange", "damper.flange_a"),
            ("damper.flange_b", "J1.flange_a"), ("J1.flange_b", "c1.flange_a"), ("c1.flange_b", "J2.flange_a"),
        ],
    )"#;
    let events = |dt: f64| {
        let sc = Scenario::parse(text, "case.ron").unwrap();
        let mut sim = Simulation::new(sc.build(text, "case.ron").unwrap());
        let mut out = Vec::new();
        let steps = (0.2 / dt).round() as usize;
        for k in 1..=steps {
            if (k as f64 - 1.0) * dt >= 0.1 - 1e-12 {
                sim.set_input("tq", 30.0).unwrap();
            }
            sim.step(k as f64 * dt - sim.time()).unwrap();
            out.extend(sim.events().iter().map(|e| (e.from.code(), e.to.code(), e.time)));
        }
        out
    };
    let all: Vec<_> = [1e-4, 1e-3, 1.0 / 60.0, 1e-2, 5e-3].iter().map(|&dt| (dt, events(dt))).collect();
    for (dt, ev) in &all {
        println!("dt {dt}: {ev:?}");
    }
    for (dt, ev) in &all {
        // Broken away at the step start, at every step size (before, 60 Hz steps found it a
        // stage later at 0.116 s, and 10 ms steps not at all), and stuck again in the end.
        assert!(ev.len() >= 2, "dt {dt}: {ev:?}");
        assert_eq!((ev[0].0, ev[0].1), (0, -1), "dt {dt}: {ev:?}");
        assert!((ev[0].2 - 0.1).abs() < 1e-12, "dt {dt}: {ev:?}");
        assert_eq!(ev[ev.len() - 1].1, 0, "dt {dt}: {ev:?}");
    }
    // The reference (0.1 ms steps) and 60 Hz steps: slide, stick at 0.102 s (60 Hz: within a
    // third of a millisecond; its 3.5 ms first stage does not resolve the 0.1 ms settling of
    // J1, which 1 to 10 ms steps, Gauss being A- but not L-stable, carry into a brief
    // overshoot of the lock: a forward slide of microseconds to milliseconds before it sticks).
    for (dt, ev) in all.iter().filter(|(dt, _)| *dt == 1e-4 || *dt == 1.0 / 60.0) {
        let modes: Vec<(i32, i32)> = ev.iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(modes, vec![(0, -1), (-1, 0)], "dt {dt}: {ev:?}");
        assert!((ev[1].2 - 0.102).abs() < 5e-4, "dt {dt}: {ev:?}");
    }
}

/// The third oscillator of the MSL `Backlash` example (an `ElastoBacklash2`, c = 2e4, d = 50,
/// b = pi/4, J = 5 released from pi/2) as an ODE, integrated by the classical Runge-Kutta method
/// at 1 us: `(phi, w)` at every millisecond to 1 s.
fn backlash2_reference() -> Vec<(f64, f64)> {
    let (j, c, d, half) = (5.0, 20e3, 50.0, std::f64::consts::FRAC_PI_8);
    // flange_b.tau: the spring-damper in contact while it pushes, else nothing.
    let tau = |p: f64, w: f64| {
        if p > half {
            (c * (p - half) + d * w).max(0.0)
        } else if p < -half {
            (c * (p + half) + d * w).min(0.0)
        } else {
            0.0
        }
    };
    let f = |p: f64, w: f64| (w, -tau(p, w) / j);
    let h = 1e-6;
    let (mut p, mut w) = (std::f64::consts::FRAC_PI_2, 0.0);
    let mut out = vec![(p, w)];
    for n in 1..=1_000_000 {
        let k1 = f(p, w);
        let k2 = f(p + h / 2.0 * k1.0, w + h / 2.0 * k1.1);
        let k3 = f(p + h / 2.0 * k2.0, w + h / 2.0 * k2.1);
        let k4 = f(p + h * k3.0, w + h * k3.1);
        p += h / 6.0 * (k1.0 + 2.0 * k2.0 + 2.0 * k3.0 + k4.0);
        w += h / 6.0 * (k1.1 + 2.0 * k2.1 + 2.0 * k3.1 + k4.1);
        if n % 1000 == 0 {
            out.push((p, w));
        }
    }
    out
}

#[test]
fn elasto_backlash2_follows_its_ode_at_1_ms_and_at_60_hz() {
    let text = r#"Scenario(name: "Backlash2", t_end: 1.0, elements: [
        (name: "fixed3", kind: Fixed()),
        (name: "elastoBacklash2", kind: ElastoBacklash2(c: 20.0e3, d: 50.0, b: 0.78539816339745)),
        (name: "inertia3", kind: Inertia(J: 5.0, phi_start: 1.570796326794897, w_start: 0.0)),
    ], connections: [("fixed3.flange", "elastoBacklash2.flange_a"), ("elastoBacklash2.flange_b", "inertia3.flange_a")])"#;
    let net = || Scenario::parse(text, "b2.ron").unwrap().build(text, "b2.ron").unwrap();
    let reference = backlash2_reference();
    let range = |k: usize| {
        let v: Vec<f64> = reference.iter().map(|r| if k == 0 { r.0 } else { r.1 }).collect();
        (v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)).max(1.0)
    };
    let mut sim = Simulation::new(net());
    let mut worst = [0.0f64; 2];
    for (k, r) in reference.iter().enumerate().skip(1) {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        let (p, w) = sim.body_state(2).unwrap();
        worst[0] = worst[0].max((p - r.0).abs() / range(0));
        worst[1] = worst[1].max((w - r.1).abs() / range(1));
    }
    println!("ElastoBacklash2 at 1 ms, worst error / range (phi, w): {worst:?}");
    // The MSL regression tube, 2e-3 of the range.
    assert!(worst[0] <= 2e-3 && worst[1] <= 2e-3, "{worst:?}");
    // At 60 Hz: the final state within 5e-2 of the range.
    let mut sim = Simulation::new(net());
    for k in 1..=60 {
        sim.step(k as f64 / 60.0 - sim.time()).unwrap();
    }
    let (p, w) = sim.body_state(2).unwrap();
    let last = reference.last().unwrap();
    let e = ((p - last.0).abs() / range(0), (w - last.1).abs() / range(1));
    println!("ElastoBacklash2 at 1/60 s, final error / range: {e:?}");
    assert!(e.0 <= 5e-2 && e.1 <= 5e-2, "{e:?}");
}

/// A sine-driven shaft through a gearbox into a braked load: as one `Gearbox`, or as MSL
/// builds it, a `LossyGear` and an `ElastoBacklash` joined at a massless mesh.
fn gearbox_drive(composed: bool, b: f64) -> Simulation {
    let gear = if composed {
        format!(
            r#"(name: "lossyGear", kind: LossyGear(ratio: 2.0, loss_table: [(0.0, 0.8, 0.8, 1.0, 1.0), (1.0, 0.7, 0.7, 2.0, 2.0)])),
               (name: "gearbox", kind: ElastoBacklash(c: 1.0e4, d: 20.0, b: {b}))"#
        )
    } else {
        format!(
            r#"(name: "gearbox", kind: Gearbox(ratio: 2.0, loss_table: [(0.0, 0.8, 0.8, 1.0, 1.0), (1.0, 0.7, 0.7, 2.0, 2.0)], c: 1.0e4, d: 20.0, b: {b}))"#
        )
    };
    let joints = if composed {
        r#"("J1.flange_b", "lossyGear.flange_a"), ("lossyGear.flange_b", "gearbox.flange_a"), ("gearbox.flange_b", "J2.flange_a")"#
    } else {
        r#"("J1.flange_b", "gearbox.flange_a"), ("gearbox.flange_b", "J2.flange_a")"#
    };
    let text = format!(
        r#"Scenario(name: "gearbox", t_end: 2.0, elements: [
            (name: "motor", kind: Torque(tau: Sine(amplitude: 40.0, f: 1.0))),
            (name: "J1", kind: Inertia(J: 0.2, phi_start: 0.0, w_start: 0.0)),
            {gear},
            (name: "J2", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
            (name: "load", kind: QuadraticSpeedDependentTorque(tau_nominal: -5.0, w_nominal: 10.0, torque_direction: false)),
        ], connections: [("motor.flange", "J1.flange_a"), {joints}, ("load.flange", "J2.flange_b")])"#
    );
    Simulation::new(Scenario::parse(&text, "gearbox.ron").unwrap().build(&text, "gearbox.ron").unwrap())
}

#[test]
fn a_gearbox_moves_as_msl_composes_it_from_a_lossy_gear_and_a_backlash() {
    for b in [0.0, 0.02] {
        for dt in [1e-3f64, 1.0 / 60.0] {
            let (mut one, mut two) = (gearbox_drive(false, b), gearbox_drive(true, b));
            let pick = |sim: &Simulation, n: &str| sim.network().elements.iter().position(|e| e.name == n).unwrap();
            let (j1a, j2a, gba) = (pick(&one, "J1"), pick(&one, "J2"), pick(&one, "gearbox"));
            let (j1b, j2b, gbb, lgb) =
                (pick(&two, "J1"), pick(&two, "J2"), pick(&two, "gearbox"), pick(&two, "lossyGear"));
            let mut modes = (Vec::new(), Vec::new());
            for k in 1..=(2.0 / dt).round() as usize {
                one.step(k as f64 * dt - one.time()).unwrap();
                two.step(k as f64 * dt - two.time()).unwrap();
                modes.0.extend(one.events().iter().map(|e| (e.from, e.to)));
                modes.1.extend(two.events().iter().filter(|e| e.element == lgb).map(|e| (e.from, e.to)));
                // The same equations with the mesh numbered elsewhere: equal to rounding.
                for (x, y) in [(j1a, j1b), (j2a, j2b)] {
                    let (p, q) = (one.body_state(x).unwrap(), two.body_state(y).unwrap());
                    assert!(
                        (p.0 - q.0).abs() < 1e-9 && (p.1 - q.1).abs() < 1e-9,
                        "b {b}, dt {dt}, t {}: {p:?} {q:?}",
                        one.time()
                    );
                }
                let (r1, r2) = (one.element_relative(gba).unwrap(), two.element_relative(gbb).unwrap());
                assert!((r1.0 - r2.0).abs() < 1e-9 && (r1.1 - r2.1).abs() < 1e-9, "{r1:?} {r2:?}");
                assert!((one.element_torque(gba) - two.element_torque(gbb)).abs() < 1e-6);
                let loss = two.element_dissipation(lgb) + two.element_dissipation(gbb);
                assert!((one.element_dissipation(gba) - loss).abs() < 1e-6 * loss.abs().max(1.0));
            }
            assert!(!modes.0.is_empty(), "the lossy gear never switched");
            assert_eq!(modes.0, modes.1, "b {b}, dt {dt}");
        }
    }
}

#[test]
fn springs_in_series_through_a_massless_flange_act_as_one_spring() {
    // J1 -> springA -> (a flange with no inertia) <- springB <- J2, each spring with an offset:
    // the junction sits where the two torques balance, so J1 and J2 feel one spring of
    // c = cA cB / (cA + cB) = 7,500 N m/rad on x = phi2 - phi1 - (rA - rB). From phi = 0, w1 = 1
    // rad/s, w2 = 0: x = x0 cos(wt) - (1/w) sin(wt) with w^2 = c (1/J1 + 1/J2), x0 = rB - rA.
    let series = r#"(name: "springA", kind: Spring(c: 1.0e4, phi_rel0: 0.01)),
            (name: "springB", kind: SpringDamper(c: 3.0e4, d: 0.0, phi_rel0: -0.02)),
        ],
        connections: [
            ("J1.flange_b", "springA.flange_a"),
            ("springA.flange_b", "springB.flange_b"),
            ("springB.flange_a", "J2.flange_a"),"#;
    let one = r#"(name: "spring", kind: Spring(c: 7.5e3, phi_rel0: 0.03)),
        ],
        connections: [
            ("J1.flange_b", "spring.flange_a"),
            ("spring.flange_b", "J2.flange_a"),"#;
    let build = |springs: &str| {
        let text = format!(
            r#"Scenario(
        name: "series",
        t_end: 1.0,
        elements: [
            (name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 1.0)),
            (name: "J2", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 0.0)),
            {springs}
        ],
    )"#
        );
        let sc = Scenario::parse(&text, "series.ron").unwrap();
        Simulation::new(sc.build(&text, "series.ron").unwrap())
    };
    let (mut sim, mut reference) = (build(series), build(one));
    let (a, b) = (element(&sim, "springA"), element(&sim, "springB"));
    let omega = (7500.0f64 * 1.5).sqrt();
    let (mut worst, mut same, mut balance, mut momentum) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for k in 1..=1000 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        reference.step(k as f64 * 1e-3 - reference.time()).unwrap();
        let t = sim.time();
        let x = |s: &Simulation| {
            s.body_state(element(s, "J2")).unwrap().0 - s.body_state(element(s, "J1")).unwrap().0 - 0.03
        };
        let exact = -0.03 * (omega * t).cos() - (omega * t).sin() / omega;
        worst = worst.max((x(&sim) - exact).abs());
        same = same.max((x(&sim) - x(&reference)).abs());
        balance = balance.max((sim.element_torque(a) + sim.element_torque(b)).abs());
        momentum = momentum.max((speed(&sim, "J1") + 2.0 * speed(&sim, "J2") - 1.0).abs());
    }
    // The junction changes nothing but rounding against one spring of the series stiffness.
    assert!(same <= 1e-12, "x is {same} rad off the one-spring network's");
    // Gauss collocation of order 4 at w h = 0.11 over 17 periods: 2e-5 of the 0.031 rad
    // amplitude (the one-spring network's own error).
    assert!(worst <= 1e-6, "x is {worst} rad off the closed form");
    // The junction's balance and the momentum hold to rounding of 200 N m torques.
    assert!(balance <= 1e-9, "the springs' torques differ by {balance} N m");
    assert!(momentum <= 1e-12, "momentum drifts by {momentum}");
}
