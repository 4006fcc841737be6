//! The MSL sensors: their CSV columns under their MSL names and output names, their readings
//! against the analytic motion, and that measuring changes nothing.

use driveline::core::{CsvRecorder, Scenario, Simulation};

/// A constant 6 N m accelerates three unit inertias J1, J2, J3 in a row from rest; `sensors`
/// puts a multi sensor between J1 and J2, a power sensor between J2 and J3, and reads the
/// others off them.
fn chain(sensors: bool) -> Simulation {
    let (extra, joints) = if sensors {
        (
            r#"(name: "fixed", kind: Fixed()), (name: "torqueSensor", kind: MultiSensor()),
               (name: "angleSensor", kind: AngleSensor()), (name: "speedSensor", kind: SpeedSensor()),
               (name: "relAngleSensor", kind: RelAngleSensor()), (name: "relSpeedSensor", kind: RelSpeedSensor()),
               (name: "powerSensor", kind: PowerSensor()), (name: "J3", kind: Inertia(J: 1.0)),"#,
            r#"("J1.flange_b", "torqueSensor.flange_a"), ("torqueSensor.flange_b", "J2.flange_a"),
               ("angleSensor.flange", "J2.flange_b"), ("speedSensor.flange", "J2.flange_b"),
               ("relAngleSensor.flange_a", "fixed.flange"), ("relAngleSensor.flange_b", "J1.flange_a"),
               ("relSpeedSensor.flange_a", "fixed.flange"), ("relSpeedSensor.flange_b", "J1.flange_a"),
               ("J2.flange_b", "powerSensor.flange_a"), ("powerSensor.flange_b", "J3.flange_a"),"#,
        )
    } else {
        (
            r#"(name: "J3", kind: Inertia(J: 1.0)),"#,
            r#"("J1.flange_b", "J2.flange_a"), ("J2.flange_b", "J3.flange_a"),"#,
        )
    };
    let text = format!(
        r#"Scenario(name: "sensors", t_end: 1.0, elements: [
            (name: "motor", kind: ConstantTorque(tau_constant: 6.0)),
            (name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
            (name: "J2", kind: Inertia(J: 1.0)),
            {extra}
        ], connections: [("motor.flange", "J1.flange_a"), {joints}])"#
    );
    let sc = Scenario::parse(&text, "sensors.ron").unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(sc.build(&text, "sensors.ron").unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn sensors_read_the_motion_and_the_torque_under_their_msl_names() {
    let mut sim = chain(true);
    let csv = CsvRecorder::new(&sim);
    let col = |n: &str| csv.names().iter().position(|c| c == n).unwrap_or_else(|| panic!("no column {n}"));
    let mut row = Vec::new();
    for k in 1..=500 {
        sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
        csv.values(&sim, &mut row);
        let t = sim.time();
        // Three unit inertias under 6 N m: a = 2 rad/s^2 (exact to rounding: constant
        // acceleration). The multi sensor passes what accelerates J2 and J3 (4 N m), the power
        // sensor what accelerates J3 (2 N m).
        let (w, phi) = (2.0 * t, t * t);
        let close = |v: f64, want: f64| (v - want).abs() <= 1e-12 * want.abs().max(1.0);
        assert!(close(row[col("torqueSensor.tau")], 4.0), "t {t}: {}", row[col("torqueSensor.tau")]);
        assert!(close(row[col("torqueSensor.w")], w));
        assert!(close(row[col("torqueSensor.power")], 4.0 * w));
        assert!(close(row[col("powerSensor.power")], 2.0 * w), "{}", row[col("powerSensor.power")]);
        assert!(close(row[col("angleSensor.phi")], phi) && close(row[col("speedSensor.w")], w));
        assert!(close(row[col("relAngleSensor.phi_rel")], phi) && close(row[col("relSpeedSensor.w_rel")], w));
    }
    // A sensor gives its outputs only: no phi_rel/w_rel/tau triple of a coupling.
    assert!(!csv.names().iter().any(|c| c == "speedSensor.tau" || c == "torqueSensor.phi_rel"), "{:?}", csv.names());
}

#[test]
fn measuring_changes_nothing() {
    // The same drive with and without its sensors, 1 s at 60 Hz: the same motion to rounding
    // (a torque sensor is a joint row where the plain chain shares one node).
    let (mut a, mut b) = (chain(true), chain(false));
    let j = |s: &Simulation, n: &str| s.network().elements.iter().position(|e| e.name == n).unwrap();
    for k in 1..=60 {
        a.step(k as f64 / 60.0 - a.time()).unwrap();
        b.step(k as f64 / 60.0 - b.time()).unwrap();
        for name in ["J1", "J2", "J3"] {
            let (x, y) = (a.body_state(j(&a, name)).unwrap(), b.body_state(j(&b, name)).unwrap());
            assert!((x.0 - y.0).abs() < 1e-12 && (x.1 - y.1).abs() < 1e-12, "{name}: {x:?} vs {y:?}");
        }
    }
}

/// A network from its elements and connections (RON).
fn network(elements: &str, connections: &str) -> Simulation {
    let text = format!(r#"Scenario(name: "states", t_end: 1.0, elements: [{elements}], connections: [{connections}])"#);
    let sc = Scenario::parse(&text, "states.ron").unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(sc.build(&text, "states.ron").unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn relative_states_fix_a_start_and_carry_no_torque() {
    // J2 gets its start from J1 through the relative states; the 2 N m on J1 does not reach J2.
    let mut sim = network(
        r#"(name: "motor", kind: ConstantTorque(tau_constant: 2.0)),
           (name: "J1", kind: Inertia(J: 0.5, phi_start: 0.0, w_start: 1.0)),
           (name: "states", kind: RelativeStates(phi_rel_start: 0.5, w_rel_start: 2.0)),
           (name: "J2", kind: Inertia(J: 1.0))"#,
        r#"("motor.flange", "J1.flange_a"), ("J1.flange_b", "states.flange_a"), ("states.flange_b", "J2.flange_a")"#,
    );
    let csv = CsvRecorder::new(&sim);
    assert!(csv.names().iter().any(|n| n == "states.phi_rel") && csv.names().iter().any(|n| n == "states.w_rel"));
    let (j1, j2, st) = (1, 3, 2);
    assert_eq!(sim.body_state(j2).unwrap(), (0.5, 3.0));
    for k in 1..=60 {
        sim.step(k as f64 / 60.0 - sim.time()).unwrap();
    }
    // J1: w = 1 + 4 t, phi = t + 2 t^2; J2: w = 3, phi = 0.5 + 3 t (exact for the order-4 rule).
    let t = sim.time();
    let (p1, w1) = sim.body_state(j1).unwrap();
    let (p2, w2) = sim.body_state(j2).unwrap();
    assert!((w1 - (1.0 + 4.0 * t)).abs() < 1e-12 && (p1 - (t + 2.0 * t * t)).abs() < 1e-12, "{p1} {w1}");
    assert!((w2 - 3.0).abs() < 1e-12 && (p2 - (0.5 + 3.0 * t)).abs() < 1e-12, "{p2} {w2}");
    let (phi_rel, w_rel) = sim.element_relative(st).unwrap();
    assert!((phi_rel - (p2 - p1)).abs() < 1e-12 && (w_rel - (w2 - w1)).abs() < 1e-12);
    assert_eq!(sim.element_torque(st), 0.0);
}

#[test]
fn initialize_flange_sets_a_flanges_start_and_carries_no_torque() {
    let mut sim = network(
        r#"(name: "J", kind: Inertia(J: 2.0)),
           (name: "init", kind: InitializeFlange(phi_start: 1.0, w_start: 3.0)),
           (name: "motor", kind: ConstantTorque(tau_constant: 4.0))"#,
        r#"("init.flange", "J.flange_b"), ("motor.flange", "J.flange_a")"#,
    );
    assert_eq!(sim.body_state(0).unwrap(), (1.0, 3.0));
    sim.step(0.5).unwrap();
    // w = 3 + 2 t, phi = 1 + 3 t + t^2.
    let (p, w) = sim.body_state(0).unwrap();
    assert!((w - 4.0).abs() < 1e-12 && (p - 2.75).abs() < 1e-12, "{p} {w}");
    // With the inertia's own start as well, the two must agree.
    let text = r#"(name: "J", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 3.0)),
           (name: "init", kind: InitializeFlange(phi_start: 1.0))"#;
    let built = Scenario::parse(
        &format!(
            r#"Scenario(name: "x", t_end: 1.0, elements: [{text}], connections: [("init.flange", "J.flange_b")])"#
        ),
        "x.ron",
    )
    .unwrap()
    .resolved_spec()
    .map(|s| driveline::core::Network::build(&s));
    assert!(matches!(built, Ok(Err(driveline::core::BuildError::ConflictingInitial { .. }))), "{built:?}");
}

#[test]
fn acceleration_sensors_read_the_acceleration_of_the_mode_the_step_ends_in() {
    // J1 (2 kg m^2) and J2 (1 kg m^2) locked by a clutch from the start and driven by 6 N m on
    // J1 share a = 2 rad/s^2; at 0.5 s the clutch opens and J1 alone takes 3 rad/s^2 while J2
    // coasts. J3 follows a speed ramp of 4 rad/s^2 (a prescribed acceleration).
    let mut sim = network(
        r#"(name: "motor", kind: ConstantTorque(tau_constant: 6.0)),
           (name: "J1", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 0.0)),
           (name: "clutch", kind: Clutch(fn_max: 1000.0, f_normalized: Step(height: -1.0, offset: 1.0, start_time: 0.5))),
           (name: "J2", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 0.0)),
           (name: "acc1", kind: AccSensor()), (name: "acc2", kind: AccSensor()),
           (name: "rel", kind: RelAccSensor()),
           (name: "ramp", kind: Speed(w_ref: Ramp(height: 4.0, duration: 1.0), phi_start: 0.0)),
           (name: "J3", kind: Inertia(J: 1.0)), (name: "acc3", kind: AccSensor())"#,
        r#"("motor.flange", "J1.flange_a"), ("J1.flange_b", "clutch.flange_a"), ("clutch.flange_b", "J2.flange_a"),
           ("acc1.flange", "J1.flange_a"), ("acc2.flange", "J2.flange_b"),
           ("rel.flange_a", "J1.flange_a"), ("rel.flange_b", "J2.flange_b"),
           ("ramp.flange", "J3.flange_a"), ("acc3.flange", "J3.flange_b")"#,
    );
    let csv = CsvRecorder::new(&sim);
    for name in ["acc1.a", "acc2.a", "rel.a_rel", "acc3.a"] {
        assert!(csv.names().iter().any(|n| n == name), "{name} in {:?}", csv.names());
    }
    let names: Vec<String> = sim.network().elements.iter().map(|e| e.name.clone()).collect();
    let id = |n: &str| names.iter().position(|e| e == n).unwrap();
    let (a1, a2, rel, a3) = (id("acc1"), id("acc2"), id("rel"), id("acc3"));
    let read = |sim: &Simulation| {
        [a1, a2, rel, a3].map(|e| sim.element_acceleration(e).unwrap_or_else(|| panic!("element {e} reads nothing")))
    };
    // Exact to rounding: the accelerations are the solution of the mode's linear equations.
    let close = |got: [f64; 4], want: [f64; 4]| {
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-12), "{got:?}, not {want:?}");
    };
    close(read(&sim), [2.0, 2.0, 0.0, 4.0]);
    for k in 1..=30 {
        sim.step(k as f64 / 60.0 - sim.time()).unwrap();
    }
    close(read(&sim), [3.0, 0.0, -3.0, 4.0]);
    assert_eq!(sim.element_torque(a1), 0.0);
    assert!(sim.element_acceleration(id("J1")).is_none());
}

#[test]
fn a_sensor_reading_drives_a_torque_as_a_feedback_law() {
    // A speed governor, tau = -k (w - w_ref): w = w_ref + (w0 - w_ref) exp(-k t / J); and an
    // angle feedback, tau = -c phi, a spring: phi = cos(sqrt(c/J) t).
    for dt in [1e-3f64, 1.0 / 60.0] {
        let mut sim = network(
            r#"(name: "J", kind: Inertia(J: 2.0, phi_start: 0.0, w_start: 10.0)),
               (name: "speed", kind: SpeedSensor()),
               (name: "governor", kind: Torque(tau: Gain(-4.0, Difference(Measured("speed"), Constant(3.0))))),
               (name: "K", kind: Inertia(J: 0.5, phi_start: 1.0, w_start: 0.0)),
               (name: "angle", kind: AngleSensor()),
               (name: "fixed", kind: Fixed()),
               (name: "spring", kind: Torque2(tau: Product([Constant(-8.0), Measured("angle")])))"#,
            r#"("speed.flange", "J.flange_b"), ("governor.flange", "J.flange_a"),
               ("angle.flange", "K.flange_b"), ("spring.flange_a", "fixed.flange"), ("spring.flange_b", "K.flange_a")"#,
        );
        let mut worst = [0.0f64; 2];
        for k in 1..=(2.0 / dt).round() as usize {
            sim.step(k as f64 * dt - sim.time()).unwrap();
            let t = sim.time();
            let w = sim.body_state(0).unwrap().1;
            worst[0] = worst[0].max((w - (3.0 + 7.0 * (-2.0 * t).exp())).abs());
            let phi = sim.body_state(3).unwrap().0;
            worst[1] = worst[1].max((phi - (4.0 * t).cos()).abs());
        }
        // Order 4 at |lambda h| = 2 dt and 4 dt. Measured: 4.4e-14 and 2.8e-12 at 1 ms, 4.4e-9
        // and 2.2e-7 at 1/60 s; the bounds leave a factor of about five.
        println!("feedback at dt {dt}: worst {worst:?}");
        let tol = if dt < 0.01 { 1e-11 } else { 1e-6 };
        assert!(worst[0] < tol && worst[1] < tol, "dt {dt}: {worst:?}");
    }
}

#[test]
fn only_a_sources_signal_may_read_a_sensor_and_only_angles_and_speeds() {
    let build = |elements: &str, connections: &str| {
        let text = format!(r#"Scenario(name: "x", t_end: 1.0, elements: [{elements}], connections: [{connections}])"#);
        Scenario::parse(&text, "x.ron").unwrap().build(&text, "x.ron").map(|_| ()).map_err(|e| e.message)
    };
    let base = r#"(name: "J1", kind: Inertia(J: 1.0, phi_start: 0.0, w_start: 1.0)),
                  (name: "J2", kind: Inertia(J: 1.0)),
                  (name: "ts", kind: TorqueSensor()), (name: "ws", kind: SpeedSensor())"#;
    let joints = r#"("J1.flange_b", "ts.flange_a"), ("ts.flange_b", "J2.flange_a"), ("ws.flange", "J2.flange_b")"#;
    // (The extra element, its flange on J1, and what the refusal says.)
    let refused = [
        (r#"(name: "m", kind: Torque(tau: Measured("ts")))"#, "m.flange", "reads a TorqueSensor"),
        (r#"(name: "m", kind: Torque(tau: Measured("nobody")))"#, "m.flange", "names no element"),
        (
            r#"(name: "b", kind: Brake(fn_max: 10.0, f_normalized: Measured("ws")))"#,
            "b.flange_a",
            "only the signal of a Torque",
        ),
        (r#"(name: "m", kind: Torque(tau: Integral(of: Measured("ws"))))"#, "m.flange", "Integral"),
    ];
    for (element, flange, says) in refused {
        let e = build(&format!("{base}, {element}"), &format!(r#"{joints}, ("{flange}", "J1.flange_a")"#)).unwrap_err();
        assert!(e.contains(says), "{e}");
    }
    build(
        &format!(r#"{base}, (name: "m", kind: Torque(tau: Measured("ws")))"#),
        &format!(r#"{joints}, ("m.flange", "J1.flange_a")"#),
    )
    .unwrap();
}
