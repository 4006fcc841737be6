//! Events that coincide. Several drives in one network, each a scaled copy of one drive under
//! the same excitation (a sine torque switched off, and a brake's normal force switched on,
//! at the same instant), lock and break away at the same instants to within about 1e-12 s.
//! At every step size from 1e-4 s to 1/30 s each drive must take exactly the mode sequence the
//! drive alone takes at 1e-4 s: an element whose slip reaches zero with another's is part of
//! that event, never taken through the opposite sliding mode first.

use driveline_core::{FrictionMode, Scenario, Simulation};
use proptest::prelude::*;

/// The step sizes every network is run at, s.
const STEPS: [f64; 4] = [1e-4, 1e-3, 1.0 / 60.0, 1.0 / 30.0];
/// Simulated time of every run, s.
const T_END: f64 = 2.0;

/// A drive of the MSL Friction example's shape: a torque `amp sin(2 pi f t)` until `t_on`
/// drives `i3`, which a clutch (normal force `clutch_fn`, on throughout) couples to `i2`; a
/// spring-damper joins `i2` to `i1`, which a brake (normal force `brake_fn` from `t_on`) holds
/// against the ground. Friction coefficient 0.5 (the MSL default), so the static capacities are
/// `0.5 fn`. Units: N m, Hz, kg m^2, N, N m/rad, N m s/rad, rad/s, s.
#[derive(Clone, Copy, Debug)]
struct Drive {
    amp: f64,
    f: f64,
    j: [f64; 3],
    clutch_fn: f64,
    brake_fn: f64,
    c: f64,
    d: f64,
    w0: [f64; 3],
    t_on: f64,
}

/// The drive scaled by `s` (every inertia, stiffness, damping, force and torque: the same
/// motion) as elements named `{p}...`, its speeds perturbed by the relative amount `e`.
fn drive_text(p: &str, d: &Drive, s: f64, e: f64, out: &mut String, cons: &mut String) {
    use std::fmt::Write;
    let _ = write!(
        out,
        r#"(name: "{p}torque", kind: Torque(tau: Product([Ref("sine"), Ref("off"), Constant({s:?})]), use_support: true)),
(name: "{p}i3", kind: Inertia(J: {j3:?}, phi_start: 0.0, w_start: {w3:?})),
(name: "{p}clutch", kind: Clutch(fn_max: {cf:?}, f_normalized: Constant(1.0))),
(name: "{p}i2", kind: Inertia(J: {j2:?}, phi_start: 0.0, w_start: {w2:?})),
(name: "{p}spring", kind: SpringDamper(c: {c:?}, d: {dd:?})),
(name: "{p}brake", kind: Brake(fn_max: {bf:?}, f_normalized: Ref("on"), use_support: true)),
(name: "{p}i1", kind: Inertia(J: {j1:?}, phi_start: 0.0, w_start: {w1:?})),
"#,
        j3 = d.j[2] * s,
        j2 = d.j[1] * s,
        j1 = d.j[0] * s,
        w3 = d.w0[2] * (1.0 + e),
        w2 = d.w0[1] * (1.0 + e),
        w1 = d.w0[0] * (1.0 + e),
        cf = d.clutch_fn * s,
        bf = d.brake_fn * s,
        c = d.c * s,
        dd = d.d * s,
    );
    let _ = write!(
        cons,
        r#"("{p}torque.support", "fixed.flange"), ("{p}torque.flange", "{p}i3.flange_a"),
("{p}i3.flange_b", "{p}clutch.flange_a"), ("{p}clutch.flange_b", "{p}i2.flange_a"),
("{p}i2.flange_b", "{p}spring.flange_a"), ("{p}spring.flange_b", "{p}brake.flange_a"),
("{p}brake.flange_b", "{p}i1.flange_a"), ("{p}brake.support", "fixed.flange"),
"#
    );
}

/// One network of the drives `(scale, speed perturbation)`, named `d0_`, `d1_`, ...
fn network(d: &Drive, drives: &[(f64, f64)]) -> Simulation {
    let mut els = String::new();
    let mut cons = String::new();
    for (k, &(s, e)) in drives.iter().enumerate() {
        drive_text(&format!("d{k}_"), d, s, e, &mut els, &mut cons);
    }
    let text = format!(
        r#"Scenario(name: "Coinciding", t_end: {T_END:?}, dt: 0.001,
signals: {{"sine": Sine(amplitude: {amp:?}, f: {f:?}), "off": Step(height: -1.0, offset: 1.0, start_time: {t:?}), "on": Step(height: 1.0, start_time: {t:?})}},
elements: [(name: "fixed", kind: Fixed()),
{els}],
connections: [{cons}])"#,
        amp = d.amp,
        f = d.f,
        t = d.t_on
    );
    let sc = Scenario::parse(&text, "coinciding.ron").unwrap_or_else(|e| panic!("{e}"));
    Simulation::new(sc.build(&text, "coinciding.ron").unwrap_or_else(|e| panic!("{e}")))
}

/// A mode change within a drive: `(element without the drive prefix, from, to)`.
type Change = (String, i32, i32);

/// Per drive, the mode changes of a run at steps of `dt`.
fn sequences(sim: &mut Simulation, dt: f64) -> Vec<Vec<Change>> {
    let drives = sim.network().elements.iter().filter(|e| e.name.ends_with("_torque")).count();
    let mut seq = vec![Vec::new(); drives];
    let steps = (T_END / dt - 1e-9).ceil() as usize;
    for k in 1..=steps {
        let target = (k as f64 * dt).min(T_END);
        sim.step(target - sim.time()).unwrap_or_else(|e| panic!("{e}"));
        for e in sim.events() {
            let name = &sim.network().elements[e.element].name;
            let (drive, el) = name.split_once('_').expect("prefixed");
            let i: usize = drive[1..].parse().expect("drive number");
            seq[i].push((el.to_string(), e.from.code(), e.to.code()));
        }
    }
    seq
}

/// The mode changes of the drive alone at 1e-4 s steps, or `None` when the drive grazes a mode
/// boundary: a sliding element's slip comes within `SLIP_MARGIN` of zero and turns back, or a
/// stuck element's torque comes within `HOLD_MARGIN` of its static capacity and falls back.
/// Whether a graze touches the boundary is decided by the truncation error of the step: an
/// ill-posed question, not the one asked here.
fn reference(d: &Drive) -> Option<Vec<Change>> {
    /// rad/s: at 1e-4 s steps the sampled minimum of a graze is within 1e-4 rad/s of the true
    /// one for these drives (slip accelerations below 1e3 rad/s^2 near a turn).
    const SLIP_MARGIN: f64 = 0.05;
    /// Of the static capacity.
    const HOLD_MARGIN: f64 = 0.02;
    let dt = STEPS[0];
    let mut sim = network(d, &[(1.0, 0.0)]);
    let find = |sim: &Simulation, n: &str| sim.network().elements.iter().position(|e| e.name == n).expect("element");
    let (clutch, brake) = (find(&sim, "d0_clutch"), find(&sim, "d0_brake"));
    let mut seq = Vec::new();
    let mut last: [Option<(f64, f64)>; 2] = [None, None];
    for k in 1..=(T_END / dt).round() as usize {
        sim.step(k as f64 * dt - sim.time()).unwrap_or_else(|e| panic!("{e}"));
        for e in sim.events() {
            let name = &sim.network().elements[e.element].name;
            seq.push((name["d0_".len()..].to_string(), e.from.code(), e.to.code()));
        }
        let brake_on = if sim.time() >= d.t_on { 1.0 } else { 0.0 };
        for (n, (el, capacity)) in
            [(clutch, 0.5 * d.clutch_fn), (brake, 0.5 * d.brake_fn * brake_on)].into_iter().enumerate()
        {
            if sim.events().iter().any(|e| e.element == el) {
                last[n] = None;
                continue;
            }
            let slip = sim.element_relative_speed(el).expect("relative speed");
            let torque = sim.element_torque(el).abs();
            let grazed = match (sim.element_mode(el), last[n]) {
                (Some(FrictionMode::Forward | FrictionMode::Backward), Some((s, _))) => {
                    slip.abs() < SLIP_MARGIN && slip.abs() > s.abs()
                }
                (Some(FrictionMode::Stuck), Some((_, t))) => {
                    capacity > 0.0 && torque > (1.0 - HOLD_MARGIN) * capacity && torque < t
                }
                _ => false,
            };
            if grazed {
                return None;
            }
            last[n] = Some((slip, torque));
        }
    }
    Some(seq)
}

/// Runs the drives together at every step size and checks each against the reference.
fn check(d: &Drive, drives: &[(f64, f64)]) -> Result<(), String> {
    let Some(expected) = reference(d) else { return Err("grazes".into()) };
    for dt in STEPS {
        let got = sequences(&mut network(d, drives), dt);
        for (i, seq) in got.iter().enumerate() {
            if *seq != expected {
                return Err(format!("dt {dt}: drive {i} {drives:?}\n  took {seq:?}\n  alone {expected:?}"));
            }
        }
    }
    Ok(())
}

/// Drives whose motion every step here resolves: a sine of at most 1.5 Hz, and the spring's
/// natural frequency and the damper's rate at most 15 rad/s and 15 1/s (at most half a radian
/// in a 1/30 s step), whatever the inertias. Torques, forces and speeds span the MSL Friction
/// example's.
fn drive() -> impl Strategy<Value = Drive> {
    (
        (20.0..400.0f64, 0.3..1.5f64, 0.05..2.0f64, 0.02..1.0f64, 0.05..2.0f64),
        (20.0..400.0f64, 200.0..3000.0f64, 2.0..15.0f64, 0.1..15.0f64),
        (-100.0..100.0f64, -100.0..100.0f64, -100.0..100.0f64, 0.2..1.0f64),
    )
        .prop_map(|((amp, f, j1, j2, j3), (clutch_fn, brake_fn, w_spring, rate), (w1, w2, w3, t_on))| {
            let compliance = 1.0 / j2 + 1.0 / j1;
            Drive {
                amp,
                f,
                j: [j1, j2, j3],
                clutch_fn,
                brake_fn,
                c: w_spring * w_spring / compliance,
                d: rate / compliance,
                w0: [w1, w2, w3],
                t_on,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, max_global_rejects: 4096, ..ProptestConfig::default() })]

    /// Two to four drives: the first as drawn, the others scaled by 0.3 to 3 with their speeds
    /// perturbed by up to 1e-12 of themselves, so that their events come within about 1e-12 s
    /// of the first drive's (farther apart than the localisation tolerance, 4e-13 s).
    #[test]
    fn drives_whose_events_coincide_take_the_mode_sequence_of_one_drive(
        d in drive(),
        others in prop::collection::vec((0.3..3.0f64, -1e-12..1e-12f64), 1..4),
    ) {
        let mut drives = vec![(1.0, 0.0)];
        drives.extend(others);
        match check(&d, &drives) {
            Err(e) if e == "grazes" => prop_assume!(false),
            Err(e) => prop_assert!(false, "{}\n  {:?}", e, d),
            Ok(()) => {}
        }
    }
}

/// The failure the property test found before the fix, kept as a fixed case: at 1/60 s the
/// second drive's clutch, whose slip reached zero a fraction of a picosecond from the first's,
/// was taken backward, forward, then stuck (`-1 -> 1 -> 0`) instead of `-1 -> 0`.
#[test]
fn a_clutch_locking_with_another_is_not_taken_through_the_opposite_mode() {
    let d = Drive {
        amp: 378.17686480784664,
        f: 0.9555424700983244,
        j: [0.6377152265034916, 0.14740279936641265, 0.4201756577221756],
        clutch_fn: 39.503190519639304,
        brake_fn: 2255.762904828895,
        c: 2.512722163093201,
        d: 1.0870295732527429,
        w0: [-76.31247829332438, 53.21820378563487, -54.79877129258139],
        t_on: 0.24987797575440035,
    };
    let drives = [(1.0, 0.0), (0.5411660723746241, -8.552492e-13), (0.681941648846498, 2.976930e-13)];
    if let Err(e) = check(&d, &drives) {
        panic!("{e}");
    }
}
