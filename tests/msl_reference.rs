//! The MSL example scenarios against the reference values of msl_examples.md and analytic
//! solutions: accuracy, event times, mode sequences, convergence order, coarse steps.

#![expect(clippy::excessive_precision, reason = "reference values are copied digit for digit from the MAP-LIB CSV")]

mod common;
use common::*;
use std::f64::consts::PI;

/// Analytic CoupledClutches solution on 0..0.4 s (msl_examples.md 13.3).
fn coupled_analytic(t: f64) -> (f64, f64) {
    let j2 = 25.0 / PI * (0.4 * PI * t).sin();
    let j1 = 10.0 + (1.0 - (10.0 * PI * t).cos()) / PI - j2;
    (j1, j2)
}

fn coupled_window_error(dt: f64) -> f64 {
    let (_, r) = run("CoupledClutches", dt, 0.4, |s| vec![speed(s, "J1"), speed(s, "J2")]);
    r.t.iter()
        .zip(&r.v)
        .map(|(&t, v)| {
            let (a1, a2) = coupled_analytic(t);
            (v[0] - a1).abs().max((v[1] - a2).abs())
        })
        .fold(0.0, f64::max)
}

#[test]
fn coupled_clutches_matches_the_analytic_window() {
    // The reference check values at 0.1 s and 0.4 s.
    let (sim, r) =
        run("CoupledClutches", 1e-3, 0.4, |s| vec![speed(s, "J1"), speed(s, "J2"), speed(s, "J3"), speed(s, "J4")]);
    let at = |t: f64| r.t.iter().position(|&x| (x - t).abs() < 1e-12).unwrap();
    let v1 = &r.v[at(0.1)];
    let v4 = &r.v[at(0.4)];
    // Order-4 collocation at 1 ms: errors of order (h w)^4 ~ 1e-10; 1e-8 leaves margin for rounding.
    assert!((v1[0] - 9.639249589595078).abs() < 1e-8, "J1(0.1) = {}", v1[0]);
    assert!((v1[1] - 0.9973701827725031).abs() < 1e-8, "J2(0.1) = {}", v1[1]);
    assert!((v4[0] - 6.166326070701500).abs() < 1e-8, "J1(0.4) = {}", v4[0]);
    assert!((v4[1] - 3.833673929298498).abs() < 1e-8, "J2(0.4) = {}", v4[1]);
    // Every step of the window, well inside the 1e-3 rad/s absolute requirement.
    let err = coupled_window_error(1e-3);
    assert!(err < 1e-8, "max error on 0..0.4 s: {err}");
    // clutch1 slides backward, clutch2/3 stay free until the step at 0.4 s.
    let seq = sequence(&sim, &r.events);
    assert!(seq.iter().all(|e| e.0 == "clutch2" && (e.1, e.2) == (2, -1)), "{seq:?}");
    assert_eq!(sim.element_mode(element(&sim, "clutch1")).unwrap().code(), -1);
    assert_eq!(v4[2], v4[3]);
}

#[test]
fn halving_the_step_shrinks_the_error_at_the_method_order() {
    let e1 = coupled_window_error(0.02);
    let e2 = coupled_window_error(0.01);
    let e3 = coupled_window_error(0.005);
    let (p1, p2) = ((e1 / e2).log2(), (e2 / e3).log2());
    // Gauss-Legendre 2 is order 4; require at least order 3 measured (the acceptance asks for 1).
    assert!(p1 > 3.0 && p2 > 3.0, "errors {e1:e} {e2:e} {e3:e}, orders {p1:.2} {p2:.2}");
}

/// SimpleGearShift reference rows (MAP-LIB, every 0.5 s): t, engine.w, load.w, clutch.w_rel.
const SGS: [(f64, f64, f64, f64); 11] = [
    (0.0, 0.0, 0.0, 0.0),
    (0.5, 0.0, 0.0, 0.0),
    (1.0, 3.8351223665582586, 1.5340489466233038, -3.8351223665582586),
    (1.5, 7.6049682319081118, 3.0419872927632445, -7.6049682319081127),
    (2.0, 11.248623325544983, 4.4994493302179963, -11.248623325544981),
    (2.5, 5.5681709399740988, 5.5681709399741184, 0.0),
    (3.0, 6.1899807525856012, 6.1899807525856207, 0.0),
    (3.5, 6.7512271169897016, 6.7512271169897202, 0.0),
    (4.0, 7.2531166614209583, 7.2531166614209779, 0.0),
    (4.5, 7.6982096409453522, 7.6982096409453717, 0.0),
    (5.0, 8.0900299437797401, 8.0900299437797596, 0.0),
];

fn gear_shift(dt: f64) -> (driveline::core::Simulation, Run) {
    run("SimpleGearShift", dt, 5.0, |s| {
        let c = element(s, "clutch");
        vec![speed(s, "engine"), speed(s, "load"), s.element_relative(c).unwrap().1]
    })
}

#[test]
fn simple_gear_shift_matches_the_reference() {
    for dt in [1e-3, 1e-2] {
        let (sim, r) = gear_shift(dt);
        // Tube: 2e-3 * max(1, range); engine.w ranges over ~11.3 rad/s.
        for &(t, ew, lw, cw) in &SGS {
            let k = r.t.iter().position(|&x| (x - t).abs() < 1e-9).unwrap();
            let v = &r.v[k];
            for (got, want) in [(v[0], ew), (v[1], lw), (v[2], cw)] {
                // The reference itself carries ~5e-6 of DASSL error here; 1e-4 is 200x inside the tube.
                assert!((got - want).abs() < 1e-4, "dt {dt} t {t}: {got} vs {want}");
            }
        }
        let seq = sequence(&sim, &r.events);
        let want = [("clutch", 2, -1), ("brake", 0, 1), ("brake", 1, 2), ("clutch", -1, 0)];
        assert_eq!(seq.len(), want.len(), "{seq:?}");
        for (a, b) in seq.iter().zip(want) {
            assert_eq!((a.0.as_str(), a.1, a.2), b);
        }
        // Event times (MAP-LIB): 2.0+, 2.0408163581592942 (mode change), 2.1, 2.1107903791524119.
        let times: Vec<f64> = r.events.iter().map(|e| e.time).collect();
        for (got, want) in times.iter().zip([2.0, 2.0408163581592942, 2.1, 2.1107903791524119]) {
            assert!((got - want).abs() < 1e-4, "dt {dt}: event at {got}, reference {want}");
        }
        // Speeds at lock-up: engine.w = load.w = 5.0425024500348 rad/s.
        let lock = times[3];
        assert!((lock - 2.1107903791524119).abs() < 1e-6, "lock-up at {lock}");
    }
}

/// First / FirstGrounded reference (msl_examples.md 13.1): t, damper.phi_rel, damper.w_rel, inertia3.phi, inertia3.w.
const FIRST: [(f64, f64, f64, f64, f64); 10] = [
    (0.1, -0.022143290766060229, -0.429617944464804, 0.022898836383418168, 0.49467289899958627),
    (0.2, -0.042315382698052559, 0.015566139092999131, 0.04259353181148616, -0.1181826076779277),
    (0.3, -0.061755804854226201, -0.40742607798495162, 0.061263784967403645, 0.42976153303871828),
    (0.4, -0.079145049561180944, 0.053743667861671625, 0.0786108499992072, -0.073266299863831638),
    (0.5, -0.095812823030872366, -0.37201687172752795, 0.096200119348445801, 0.47193077324544286),
    (0.6, -0.11080599693435575, 0.069365134418891888, 0.11144308300858047, -0.13784222568859114),
    (0.7, -0.12550121345132645, -0.36473447213115751, 0.12551465536455719, 0.3671832116629461),
    (0.8, -0.13858496253868385, 0.090176395115240462, 0.13790128085155626, -0.15186949335549388),
    (0.9, -0.15121620816551073, -0.33220367934817041, 0.1510312182159429, 0.43379300572395285),
    (1.0, -0.1623281810820793, 0.11221860229049774, 0.16286001199358532, -0.1383323790831503),
];

#[test]
fn first_and_first_grounded_match_the_reference() {
    for name in ["First", "FirstGrounded"] {
        let (_, r) = run(name, 1e-3, 1.0, |s| {
            let d = element(s, "damper");
            let (pr, wr) = s.element_relative(d).unwrap();
            let (p3, w3) = s.body_state(element(s, "inertia3")).unwrap();
            vec![pr, wr, p3, w3]
        });
        for &(t, a, b, c, d) in &FIRST {
            let k = r.t.iter().position(|&x| (x - t).abs() < 1e-9).unwrap();
            for (got, want) in r.v[k].iter().zip([a, b, c, d]) {
                // Signals range over < 1: the tube is 2e-3 absolute.
                assert!((got - want).abs() < 2e-3, "{name} t {t}: {got} vs {want}");
            }
        }
    }
}

#[test]
fn coarse_60_hz_steps_keep_the_mode_sequence() {
    for (name, t_end) in [("CoupledClutches", 1.5), ("SimpleGearShift", 5.0)] {
        let probe = |s: &driveline::core::Simulation| {
            s.network().elements.iter().enumerate().filter_map(|(e, _)| s.body_state(e).map(|b| b.1)).collect()
        };
        let (sf, fine) = run(name, 1e-3, t_end, probe);
        let (sc, coarse) = run(name, 1.0 / 60.0, t_end, probe);
        assert_eq!(sequence(&sf, &fine.events), sequence(&sc, &coarse.events), "{name}");
        for (a, b) in fine.events.iter().zip(&coarse.events) {
            assert!((a.time - b.time).abs() < 1e-4, "{name}: event {} vs {}", a.time, b.time);
        }
        // Compare on the common grid (every 0.05 s).
        for (k, &t) in coarse.t.iter().enumerate() {
            if let Some(j) = fine.t.iter().position(|&x| (x - t).abs() < 1e-9) {
                for (a, b) in fine.v[j].iter().zip(&coarse.v[k]) {
                    assert!((a - b).abs() < 5e-2, "{name} t {t}: {a} vs {b}");
                }
            }
        }
    }
}

#[test]
fn rolling_wheel_follows_the_analytic_tanh() {
    // After the step at 0.1 s: (J + m r^2) w' = 10 - 10 (w/5)^2 r, so w = 5 tanh(t - 0.1).
    let (_, r) = run("RollingWheel", 1e-3, 5.0, |s| vec![speed(s, "inertia"), speed(s, "mass")]);
    for (t, v) in r.t.iter().zip(&r.v) {
        let exact = if *t <= 0.1 { 0.0 } else { 5.0 * (t - 0.1).tanh() };
        // Order-4 collocation at 1 ms on a smooth ODE: errors ~1e-12; 1e-9 leaves rounding margin.
        assert!((v[0] - exact).abs() < 1e-9, "t {t}: {} vs {exact}", v[0]);
        assert_eq!(v[0], v[1], "radius 1: the mass moves with the rim");
    }
}

#[test]
fn one_way_clutch_never_slips_backwards_and_holds_when_locked() {
    for name in ["OneWayClutch", "OneWayClutchDisengaged"] {
        let (sim, r) = run(name, 1e-3, 2.0, |s| {
            let c = element(s, "oneWayClutch");
            vec![s.element_relative(c).unwrap().1, s.element_mode(c).unwrap().code() as f64]
        });
        for (t, v) in r.t.iter().zip(&r.v) {
            // w_rel = w_out - w_in never goes negative; locked means exactly zero.
            assert!(v[0] >= -1e-12, "{name} t {t}: w_rel {}", v[0]);
            if v[1] == 0.0 {
                assert!(v[0].abs() < 1e-12, "{name} t {t}: locked with w_rel {}", v[0]);
            }
        }
        // It alternates between locked and overrunning, never free or backward.
        assert!(r.events.len() >= 4, "{name}: {:?}", sequence(&sim, &r.events));
        assert!(sequence(&sim, &r.events).iter().all(|e| matches!((e.1, e.2), (0, 1) | (1, 0))));
    }
}

#[test]
fn lossy_gear_demo3_stops_on_bearing_friction_then_self_locks() {
    // Rolling forward with no external torque, side a drives: (J1 + J2) w' = -tauLoss and
    // tau_a = tauLoss / 2, so Q1 gives tauLoss = 0.75 tauLoss / 2 + 0.625 = 1 N m and
    // w' = -1 / 0.002 = -500 rad/s^2: both inertias stop at 10 / 500 = 0.02 s. The 1 N m load
    // at 0.5 s needs a loss torque of 1 N m at tau_a = 0, inside the standstill range [-0.625, 2.5]:
    // the gear stays locked.
    let (sim, r) = run("LossyGearDemo3", 1e-3, 1.0, |s| vec![speed(s, "Inertia1"), speed(s, "Inertia2")]);
    for (t, v) in r.t.iter().zip(&r.v) {
        let exact = (10.0 - 500.0 * t).max(0.0);
        // Constant deceleration: integrated to rounding.
        assert!((v[0] - exact).abs() < 1e-9 && (v[1] - exact).abs() < 1e-9, "t {t}: {v:?}");
    }
    let seq = sequence(&sim, &r.events);
    assert_eq!(seq, vec![("gear".to_string(), 1, 0)]);
    assert!((r.events[0].time - 0.02).abs() < 1e-12, "{}", r.events[0].time);
}

#[test]
fn lossy_gear_demos_alternate_between_rolling_and_self_locking() {
    for name in ["LossyGearDemo1", "LossyGearDemo2"] {
        let (sim, r) = run(name, 1e-3, 0.5, |s| {
            let g = element(s, "gear");
            vec![s.element_relative(g).unwrap().1, s.element_mode(g).unwrap().code() as f64, speed(s, "Inertia1")]
        });
        for (t, v) in r.t.iter().zip(&r.v) {
            if v[1] == 0.0 {
                assert_eq!(v[2], 0.0, "{name} t {t}: a locked gear holds Inertia1 exactly");
            }
        }
        let gear: Vec<(i32, i32)> =
            sequence(&sim, &r.events).into_iter().filter(|e| e.0 == "gear").map(|e| (e.1, e.2)).collect();
        // Released backwards by the load at t = 0, it locks, rolls forwards, locks, rolls back.
        assert_eq!(gear, vec![(-1, 0), (0, 1), (1, 0), (0, -1)], "{name}");
    }
}
