//! The MSL sources whose torque is a function of speed, the two-flange torque and the constant
//! speed, each against its analytic solution at 1 ms and at 60 Hz.

use driveline::core::{Scenario, Simulation};

/// A network from its elements and connections (RON), at rest unless the elements say.
fn network(elements: &str, connections: &str) -> Simulation {
    let text =
        format!(r#"Scenario(name: "sources", t_end: 1.0, elements: [{elements}], connections: [{connections}])"#);
    let sc = Scenario::parse(&text, "sources.ron").unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(sc.build(&text, "sources.ron").unwrap_or_else(|e| panic!("{e}")))
}

/// Runs `sim` to `t_end` in steps of `dt`, checking `speed(t)` of element `body` after every
/// step to `tol`.
fn follows(mut sim: Simulation, body: &str, dt: f64, t_end: f64, tol: f64, speed: impl Fn(f64) -> f64) {
    let k = sim.network().elements.iter().position(|e| e.name == body).expect("body");
    let steps = (t_end / dt).round() as usize;
    for n in 1..=steps {
        sim.step(n as f64 * dt - sim.time()).unwrap_or_else(|e| panic!("{e}"));
        let (t, w) = (sim.time(), sim.body_state(k).expect("a body").1);
        assert!((w - speed(t)).abs() <= tol * speed(t).abs().max(1.0), "dt {dt}, t {t}: w = {w}, not {}", speed(t));
    }
}

/// Steps `sim` `n` times by `dt`, calling `check(sim, t)` after each step.
fn each_step(mut sim: Simulation, dt: f64, n: usize, mut check: impl FnMut(&Simulation, f64)) {
    for k in 1..=n {
        sim.step(k as f64 * dt - sim.time()).unwrap_or_else(|e| panic!("{e}"));
        check(&sim, sim.time());
    }
}

/// The two steps every test runs at, s.
const STEPS: [f64; 2] = [1e-3, 1.0 / 60.0];

#[test]
fn a_linear_speed_dependent_load_decays_exponentially() {
    // J dw/dt = (tau_nominal / w_nominal) w = -0.4 J w: w = 20 exp(-0.4 t).
    for dt in STEPS {
        let sim = network(
            r#"(name: "J", kind: Inertia(J: 0.5, phi_start: 0.0, w_start: 20.0)),
               (name: "load", kind: LinearSpeedDependentTorque(tau_nominal: -2.0, w_nominal: 10.0, torque_direction: false))"#,
            r#"("load.flange", "J.flange_b")"#,
        );
        // Order 4 at |lambda h| <= 0.007: the error stays below 1e-10 of the speed.
        follows(sim, "J", dt, 5.0, 1e-10, |t| 20.0 * (-0.4 * t).exp());
    }
    // TorqueDirection = true: the load acts in the same direction at both signs of w, so a
    // shaft turning backwards is driven further backwards: w = -20 exp(0.4 t).
    for dt in STEPS {
        let sim = network(
            r#"(name: "J", kind: Inertia(J: 0.5, phi_start: 0.0, w_start: -20.0)),
               (name: "load", kind: LinearSpeedDependentTorque(tau_nominal: -2.0, w_nominal: 10.0))"#,
            r#"("load.flange", "J.flange_b")"#,
        );
        follows(sim, "J", dt, 2.0, 1e-10, |t| -20.0 * (0.4 * t).exp());
    }
}

#[test]
fn an_inverse_speed_dependent_torque_puts_in_a_constant_power() {
    // J w dw/dt = tau_nominal w_nominal = 50 W (above w0 = 1 rad/s): w = sqrt(9 + 50 t).
    for dt in STEPS {
        let sim = network(
            r#"(name: "J", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 3.0)),
               (name: "motor", kind: InverseSpeedDependentTorque(tau_nominal: 10.0, w_nominal: 5.0, w0: 1.0))"#,
            r#"("motor.flange", "J.flange_b")"#,
        );
        // The square root's derivatives shrink with w; at 60 Hz the first steps' error is
        // about 1e-9 of the speed.
        follows(sim, "J", dt, 2.0, 1e-8, |t| (9.0 + 50.0 * t).sqrt());
    }
}

#[test]
fn a_sign_torque_brakes_at_a_constant_rate_and_holds_near_standstill() {
    // -4 N m against the motion (|w| >> w0 / 50): w = 10 - 2 t until the regularised zone.
    for dt in STEPS {
        let mut sim = network(
            r#"(name: "J", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 10.0)),
               (name: "drag", kind: SignTorque(tau_constant: -4.0, w0: 1.0))"#,
            r#"("drag.flange", "J.flange_b")"#,
        );
        let k = sim.network().elements.iter().position(|e| e.name == "J").unwrap();
        let steps = (6.0 / dt).round() as usize;
        for n in 1..=steps {
            sim.step(n as f64 * dt - sim.time()).unwrap();
            let (t, w) = (sim.time(), sim.body_state(k).unwrap().1);
            if t <= 4.9 {
                // tanh(50 x) is 1 to rounding for x > 0.4: the deceleration is exact.
                assert!((w - (10.0 - 2.0 * t)).abs() < 1e-9, "dt {dt}, t {t}: {w}");
            }
        }
        // In the regularised zone the torque is -200 w: the speed decays to rest and stays.
        let w = sim.body_state(k).unwrap().1;
        assert!(w.abs() < 1e-6, "dt {dt}: w = {w} at 6 s");
    }
}

#[test]
fn a_torque_between_two_flanges_conserves_their_momentum() {
    // flange_a.tau = tau = 6 N m: J1 = 1 is driven backwards (-6 rad/s^2), J2 = 3 forwards (2).
    for dt in STEPS {
        let mut sim = network(
            r#"(name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
               (name: "J2", kind: Inertia(J: 3.0, phi_start: 0.0, w_start: 0.0)),
               (name: "t2", kind: Torque2(tau: Constant(6.0)))"#,
            r#"("J1.flange_b", "t2.flange_a"), ("t2.flange_b", "J2.flange_a")"#,
        );
        let (j1, j2) = (0, 1);
        for n in 1..=120 {
            sim.step(n as f64 * dt - sim.time()).unwrap();
            let t = sim.time();
            let (w1, w2) = (sim.body_state(j1).unwrap().1, sim.body_state(j2).unwrap().1);
            assert!((w1 + 6.0 * t).abs() < 1e-12 * (1.0 + t) && (w2 - 2.0 * t).abs() < 1e-12 * (1.0 + t), "t {t}");
            assert!((w1 + 3.0 * w2).abs() < 1e-12 * (1.0 + t), "momentum at {t}: {}", w1 + 3.0 * w2);
        }
    }
}

#[test]
fn a_constant_speed_turns_its_flange_at_that_speed() {
    // 7 rad/s into an inertia and a damper to the ground: phi = 0.5 + 7 t, the damper takes
    // d w = 14 N m, which the source supplies.
    for dt in STEPS {
        let mut sim = network(
            r#"(name: "fixed", kind: Fixed()),
               (name: "J", kind: Inertia(J: 1.0)),
               (name: "drive", kind: ConstantSpeed(w_fixed: 7.0, phi_start: 0.5)),
               (name: "damper", kind: Damper(d: 2.0))"#,
            r#"("drive.flange", "J.flange_a"), ("J.flange_b", "damper.flange_a"), ("damper.flange_b", "fixed.flange")"#,
        );
        let k = sim.network().elements.iter().position(|e| e.name == "J").unwrap();
        let damper = sim.network().elements.iter().position(|e| e.name == "damper").unwrap();
        let drive = sim.network().elements.iter().position(|e| e.name == "drive").unwrap();
        for n in 1..=60 {
            sim.step(n as f64 * dt - sim.time()).unwrap();
            let (phi, w) = sim.body_state(k).unwrap();
            assert!((w - 7.0).abs() < 1e-12 && (phi - 0.5 - 7.0 * sim.time()).abs() < 1e-12, "{phi} {w}");
            assert!((sim.element_torque(damper).abs() - 14.0).abs() < 1e-9, "{}", sim.element_torque(damper));
            // The source supplies that torque (its flange pushes the shaft forwards).
            assert!((sim.element_torque(drive) - 14.0).abs() < 1e-9, "source torque {}", sim.element_torque(drive));
        }
    }
}

#[test]
fn a_move_source_takes_its_flange_along_the_given_motion() {
    // phi = 0.5 sin(2 pi t), w = pi cos(2 pi t), a = -2 pi^2 sin(2 pi t) on J = 3 kg m^2: the
    // source supplies J a.
    use std::f64::consts::{FRAC_PI_2, PI};
    for dt in STEPS {
        let mut sim = network(
            &format!(
                r#"(name: "J", kind: Inertia(J: 3.0)),
                   (name: "move", kind: Move(phi: Sine(amplitude: 0.5, f: 1.0), w: Sine(amplitude: {w}, f: 1.0, phase: {FRAC_PI_2:?}),
                                             a: Sine(amplitude: {a}, f: 1.0, phase: {PI:?})))"#,
                w = PI,
                a = 2.0 * PI * PI,
            ),
            r#"("move.flange", "J.flange_a")"#,
        );
        let (j, src) = (0, 1);
        for n in 1..=(2.0 / dt).round() as usize {
            sim.step(n as f64 * dt - sim.time()).unwrap();
            let t = sim.time();
            let (phi, w) = sim.body_state(j).unwrap();
            let x = 2.0 * PI * t;
            // The speed is imposed exactly; the angle is its integral by the order-4 method:
            // (2 pi h)^4 / 720 of the amplitude at 60 Hz, 6e-7 rad.
            assert!((w - PI * x.cos()).abs() < 1e-12, "dt {dt}, t {t}: w {w}");
            assert!((phi - 0.5 * x.sin()).abs() < 1e-6, "dt {dt}, t {t}: phi {phi}");
            let tau = sim.element_torque(src);
            assert!((tau + 3.0 * 2.0 * PI * PI * x.sin()).abs() < 1e-9, "dt {dt}, t {t}: tau {tau}");
        }
    }
}

#[test]
fn a_disc_joins_two_shafts_at_an_angle_offset_and_passes_the_torque() {
    // 6 N m on J1 = 1, through a disc (offset 0.3 rad) to J2 = 2: a = 2 rad/s^2, the disc
    // passes J2 a = 4 N m, flange_b stays 0.3 rad ahead.
    for dt in STEPS {
        let sim = network(
            r#"(name: "motor", kind: ConstantTorque(tau_constant: 6.0)),
               (name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
               (name: "disc", kind: Disc(deltaPhi: 0.3)),
               (name: "J2", kind: Inertia(J: 2.0))"#,
            r#"("motor.flange", "J1.flange_a"), ("J1.flange_b", "disc.flange_a"), ("disc.flange_b", "J2.flange_a")"#,
        );
        each_step(sim, dt, 60, |sim, t| {
            let ((p1, w1), (p2, w2)) = (sim.body_state(1).unwrap(), sim.body_state(3).unwrap());
            assert!((p2 - p1 - 0.3).abs() < 1e-12 && (w1 - w2).abs() < 1e-12, "t {t}");
            assert!((w1 - 2.0 * t).abs() < 1e-12 * (1.0 + t) && (p1 - t * t).abs() < 1e-12 * (1.0 + t), "t {t}");
            assert!((sim.element_torque(2) - 4.0).abs() < 1e-9, "disc torque {}", sim.element_torque(2));
        });
    }
}

#[test]
fn an_ideal_gear_r2t_turns_a_rotation_into_a_translation() {
    // 6 N m on J = 1 kg m^2 driving a 2 kg mass through 4 rad/m: the mass's inertia seen at
    // the shaft is m / r^2 = 0.125 kg m^2, so a = 6 / 1.125 rad/s^2 and v = w / 4.
    for dt in STEPS {
        let sim = network(
            r#"(name: "motor", kind: ConstantTorque(tau_constant: 6.0)),
               (name: "J", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
               (name: "r2t", kind: IdealGearR2T(ratio: 4.0)),
               (name: "mass", kind: Mass(m: 2.0))"#,
            r#"("motor.flange", "J.flange_a"), ("J.flange_b", "r2t.flangeR"), ("r2t.flangeT", "mass.flange_a")"#,
        );
        each_step(sim, dt, 60, |sim, t| {
            let ((phi, w), (s, v)) = (sim.body_state(1).unwrap(), sim.body_state(3).unwrap());
            let a = 6.0 / 1.125;
            assert!((w - a * t).abs() < 1e-12 * (1.0 + t) && (v - w / 4.0).abs() < 1e-12 * (1.0 + t), "t {t}");
            assert!((phi - 4.0 * s).abs() < 1e-12 * (1.0 + t), "t {t}: phi {phi}, s {s}");
        });
    }
}

#[test]
fn an_accelerate_source_integrates_its_acceleration_exactly() {
    // a_ref = 2 + 3 sin(2 pi t), less 6 from 0.5 s on (a time event inside a step of 1/7 s):
    // w = 1 + 2 t + 3/(2 pi) (1 - cos 2 pi t) - 6 (t - 0.5)^+,
    // phi = t + t^2 + 3/(2 pi) (t - sin(2 pi t)/(2 pi)) - 3 ((t - 0.5)^+)^2.
    let w_exact = |t: f64| {
        let tau = std::f64::consts::TAU;
        1.0 + 2.0 * t + 3.0 / tau * (1.0 - (tau * t).cos()) - 6.0 * (t - 0.5).max(0.0)
    };
    let phi_exact = |t: f64| {
        let tau = std::f64::consts::TAU;
        t + t * t + 3.0 / tau * (t - (tau * t).sin() / tau) - 3.0 * (t - 0.5).max(0.0).powi(2)
    };
    for dt in [1e-3f64, 1.0 / 60.0, 1.0 / 7.0] {
        let sim = network(
            r#"(name: "J", kind: Inertia(J: 2.0)),
               (name: "acc", kind: Accelerate(a_ref: Sum([Constant(2.0), Sine(amplitude: 3.0, f: 1.0), Step(height: -6.0, start_time: 0.5)]), w_start: 1.0, phi_start: 0.0))"#,
            r#"("acc.flange", "J.flange_a")"#,
        );
        // The integral by three-point Gauss quadrature between the time events: error of order
        // (dt)^6 w^(7); 1e-12 of the speed at these steps.
        let n = (2.0 / dt).round() as usize;
        each_step(sim, dt, n, |sim, t| {
            let (phi, w) = sim.body_state(0).unwrap();
            assert!((w - w_exact(t)).abs() < 1e-9, "dt {dt}, t {t}: w = {w}, not {}", w_exact(t));
            // The angle by the order-4 collocation of the prescribed speed, error of order
            // h^5 w^(4): measured 2.2e-10 rad in the first 1/60 s step, 1.1e-7 in the first 1/7 s.
            assert!((phi - phi_exact(t)).abs() < 1e-6, "dt {dt}, t {t}: phi = {phi}, not {}", phi_exact(t));
            // The torque that takes: J a.
            let a = 2.0 + 3.0 * (std::f64::consts::TAU * t).sin() - if t >= 0.5 { 6.0 } else { 0.0 };
            assert!((sim.element_torque(1) - 2.0 * a).abs() < 1e-6, "dt {dt}, t {t}: tau {}", sim.element_torque(1));
        });
    }
}

#[test]
fn filtered_sources_follow_msl_input_filters() {
    // MSL Speed with exact = false: a first-order lag at f_crit = 5 Hz of a unit step at 0.5 s,
    // w = 1 - exp(-w_c (t - 0.5)). MSL Position with exact = false: its second-order filter at
    // 2 Hz of a unit step at 0.1 s, y'' = ((1 - y) w_c - af y') w_c / bf, underdamped:
    // y = 1 - exp(-a t) (cos b t + a/b sin b t).
    let wc1 = std::f64::consts::TAU * 5.0;
    let wc2 = std::f64::consts::TAU * 2.0;
    let (af, bf) = (1.3617, 0.6180);
    let a = af * wc2 / (2.0 * bf);
    let b = (wc2 * wc2 / bf - a * a).sqrt();
    for dt in [1e-3f64, 1.0 / 60.0] {
        let sim = network(
            r#"(name: "J1", kind: Inertia(J: 1.0)),
               (name: "speed", kind: Speed(w_ref: Filter(of: Step(height: 1.0, start_time: 0.5), f_crit: 5.0), phi_start: 0.0)),
               (name: "J2", kind: Inertia(J: 1.0)),
               (name: "position", kind: Position(phi_ref: Filter(of: Step(height: 1.0, start_time: 0.1), f_crit: 2.0, order: 2)))"#,
            r#"("speed.flange", "J1.flange_a"), ("position.flange", "J2.flange_a")"#,
        );
        let n = (1.5 / dt).round() as usize;
        each_step(sim, dt, n, |sim, t| {
            let w = sim.body_state(0).unwrap().1;
            let w_exact = if t < 0.5 { 0.0 } else { 1.0 - (-wc1 * (t - 0.5)).exp() };
            // The filter's own integration (RK4, sub-steps of 0.1 / w_c): 1e-8 of the step.
            assert!((w - w_exact).abs() < 1e-8, "dt {dt}, t {t}: w = {w}, not {w_exact}");
            let (phi, w2) = sim.body_state(2).unwrap();
            let s = t - 0.1;
            let y = if s < 0.0 { 0.0 } else { 1.0 - (-a * s).exp() * ((b * s).cos() + a / b * (b * s).sin()) };
            let dy = if s < 0.0 { 0.0 } else { (-a * s).exp() * (a * a / b + b) * (b * s).sin() };
            // (The filter's RK4 in sub-steps of 0.025 / w_c: 2.7e-8 at 1/60 s, where a sub-step
            // straddles the step's first milliseconds.)
            assert!((w2 - dy).abs() < 1e-7, "dt {dt}, t {t}: w = {w2}, not {dy}");
            // The angle is the collocation's integral of the prescribed speed: order 4, up to
            // 1.3e-6 at 1/60 s in the step's transient (h w_c = 0.2).
            let tol = if dt < 0.01 { 1e-8 } else { 1e-5 };
            assert!((phi - y).abs() < tol, "dt {dt}, t {t}: phi = {phi}, not {y}");
        });
    }
}
