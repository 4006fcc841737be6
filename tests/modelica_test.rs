//! The `ModelicaTest.Rotational` models in `assets/scenarios/modelica_test/`. The published
//! reference results of the MSL regression tests are not available here, so each model is held
//! to its own converged solution: every CSV column at 1 ms inside the regression tube
//! (2e-3 max(1, range)) of the same model at 0.1 ms with the same mode sequence, and the final
//! values at 1/60 s within 5e-2 of the range. Where the model has an analytic solution, it is
//! held to that too.

use driveline::core::{CsvRecorder, Scenario, Simulation};
use std::path::Path;

/// Loads `path` and calls `each` after every step of `dt` to the scenario's `t_end`.
fn step_through(path: &Path, dt: f64, mut each: impl FnMut(&Simulation)) {
    let (sc, net) = Scenario::load_network(path).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Simulation::new(net);
    for k in 1..=(sc.t_end / dt).round() as usize {
        sim.step(k as f64 * dt - sim.time()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        each(&sim);
    }
}

/// A model file of `assets/scenarios/modelica_test/`.
fn model(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios/modelica_test").join(file)
}

/// The index of the element called `name`.
fn id(sim: &Simulation, name: &str) -> usize {
    sim.network().elements.iter().position(|e| e.name == name).unwrap()
}

/// Every column after every step of `dt` to `t_end`, and the `(element, from, to)` mode events.
fn run(path: &Path, dt: f64) -> (Vec<String>, Vec<(f64, Vec<f64>)>, Vec<(usize, i32, i32)>) {
    let (mut csv, mut rows, mut events, mut buf) = (None, Vec::new(), Vec::new(), Vec::new());
    step_through(path, dt, |sim| {
        let csv = csv.get_or_insert_with(|| CsvRecorder::new(sim));
        csv.values(sim, &mut buf);
        rows.push((sim.time(), buf.clone()));
        events.extend(sim.events().iter().map(|e| (e.element, e.from.code(), e.to.code())));
    });
    (csv.map(|c| c.names().to_vec()).unwrap_or_default(), rows, events)
}

#[test]
fn every_modelica_test_model_meets_the_regression_tube_against_its_converged_solution() {
    let mut models = 0;
    for path in scenario_files(&model("")) {
        let (names, fine, fine_events) = run(&path, 1e-4);
        let (_, ms, ms_events) = run(&path, 1e-3);
        let (_, coarse, _) = run(&path, 1.0 / 60.0);
        let name = path.file_stem().unwrap().to_string_lossy();
        assert_eq!(ms_events, fine_events, "{name}: the mode sequence at 1 ms");
        for (c, col) in names.iter().enumerate() {
            let values = fine.iter().map(|r| r.1[c]).filter(|v| v.is_finite());
            let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let range = (hi - lo).max(1.0);
            // The 1 ms rows at the same instants as every tenth fine row.
            let worst = ms
                .iter()
                .zip(fine.iter().skip(9).step_by(10))
                .map(|(a, b)| (a.1[c] - b.1[c]).abs())
                .filter(|e| !e.is_nan())
                .fold(0.0, f64::max);
            assert!(worst <= 2e-3 * range, "{name}: {col} at 1 ms is {worst} off, outside 2e-3 x {range}");
            let last = (coarse.last().unwrap().1[c] - fine.last().unwrap().1[c]).abs();
            if !last.is_nan() {
                assert!(last <= 5e-2 * range, "{name}: {col} ends {last} off at 1/60 s (range {range})");
            }
        }
        models += 1;
    }
    // AllComponents, TestSpeed, TestBearingConversion, TestFriction, TestFrictionPosition,
    // TestBraking, TestMove and the six ForUsersGuide models.
    assert_eq!(models, 13);
}

/// The `.ron` files under `dir` and its sub-packages (`ForUsersGuide/`), in a fixed order.
fn scenario_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(scenario_files(&path));
        } else if path.extension().is_some_and(|e| e == "ron") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn an_element_moves_alike_with_its_support_inside_and_on_a_fixed() {
    // TestBearingConversion: each pair is the same element, support inside (useSupport = false)
    // and support connected to a Fixed. Equal to rounding (the networks number them apart).
    let pairs = [
        ("inertia", "inertia1"),
        ("inertia2", "inertia3"),
        ("inertia4", "inertia6"),
        ("inertia8", "inertia10"),
        ("inertia12", "inertia13"),
        ("inertia14", "inertia15"),
        ("inertia16", "inertia17"),
        ("inertia18", "inertia19"),
        ("inertia20", "inertia21"),
    ];
    let mut moved = 0;
    step_through(&model("TestBearingConversion.ron"), 1e-3, |sim| {
        for (a, b) in pairs {
            let (p, q) = (sim.body_state(id(sim, a)).unwrap(), sim.body_state(id(sim, b)).unwrap());
            assert!((p.0 - q.0).abs() <= 1e-12 && (p.1 - q.1).abs() <= 1e-12, "t {}: {p:?} against {q:?}", sim.time());
            moved += usize::from(p.1 != 0.0);
        }
    });
    assert!(moved > 0, "nothing moved");
}

/// Steps the model `file` at `dt` to its end and calls `check(t, speed of each named
/// inertia)` after every step.
fn follow(file: &str, dt: f64, names: &[&str], mut check: impl FnMut(f64, &[f64])) {
    let mut w = vec![0.0; names.len()];
    step_through(&model(file), dt, |sim| {
        for (w, name) in w.iter_mut().zip(names) {
            *w = sim.body_state(id(sim, name)).unwrap().1;
        }
        check(sim.time(), &w);
    });
}

/// The root of `f` in `[a, b]` (a sign change), by bisection to rounding.
fn root(f: impl Fn(f64) -> f64, mut a: f64, mut b: f64) -> f64 {
    assert!(f(a) * f(b) <= 0.0, "no sign change in [{a}, {b}]");
    for _ in 0..200 {
        let m = 0.5 * (a + b);
        if (f(a) > 0.0) == (f(m) > 0.0) {
            a = m;
        } else {
            b = m;
        }
    }
    a
}

/// A motion in three phases: `f[0]` up to `at[0]`, `f[1]` up to `at[1]`, `f[2]` after.
fn phases(t: f64, at: [f64; 2], f: [&dyn Fn(f64) -> f64; 3]) -> f64 {
    f[usize::from(t > at[0]) + usize::from(t > at[1])](t)
}

/// TestBraking's five speed-dependent brakes have closed-form speeds (J = 1 kg m^2, w(0) = 100
/// rad/s, tau_nominal = -100 N m, w_nominal = 100 rad/s):
/// - linear, `w' = -w`: `w = 100 e^-t`;
/// - quadratic, `w' = -w^2/100`: `w = 100/(1 + t)`;
/// - constant, `w' = -100`: `w = 100 (1 - t)`, through zero (a constant torque does not stop);
/// - sign (Exp, w0 = 1), `w' = -100 tanh(50 w)`: `sinh(50 w) = sinh(5000) e^(-5000 t)`;
/// - inverse (TorqueDirection), `w' = -10^4/|w|` outside `|w| < 1`, `-10^4` inside:
///   `w^2 = 10^4 - 2 10^4 t` down to 1 rad/s, through the band at 10^4 rad/s^2, then
///   `w = -sqrt(1 + 2 10^4 (t - t2))`.
///
/// Each is held to the acceptance of the MSL regression tests: at 1 ms inside the tube of
/// 2e-3 x max(1, range) everywhere, at 1/60 s the final value within 5e-2 x max(1, range). The
/// three smooth ones are also held to 1e-8 rad/s at 1 ms (Gauss collocation of order 4; the
/// rest is rounding).
#[test]
fn test_braking_follows_the_closed_form_speeds() {
    let sign = |t: f64| {
        // asinh(e^x)/50 with x = ln sinh(5000) - 5000 t, without overflow.
        let x = 5000.0 * (1.0 - t) - std::f64::consts::LN_2;
        if x > 30.0 { (x + std::f64::consts::LN_2) / 50.0 } else { x.exp().asinh() / 50.0 }
    };
    let t1 = (1e4 - 1.0) / 2e4;
    let t2 = t1 + 2e-4;
    let inverse = |t: f64| {
        if t <= t1 {
            (1e4 - 2e4 * t).sqrt()
        } else if t <= t2 {
            1.0 - 1e4 * (t - t1)
        } else {
            -(1.0 + 2e4 * (t - t2)).sqrt()
        }
    };
    let exact = |t: f64| [100.0 * (-t).exp(), 100.0 / (1.0 + t), 100.0 * (1.0 - t), sign(t), inverse(t)];
    let names = ["inertia1", "inertia2", "inertia3", "inertia4", "inertia6"];
    // The ranges of the exact speeds over [0, 2] s.
    let range = [100.0 * (1.0 - (-2.0f64).exp()), 100.0 - 100.0 / 3.0, 200.0, 100.0, 100.0 - inverse(2.0)];
    let mut worst = [0.0f64; 5];
    follow("TestBraking.ron", 1e-3, &names, |t, w| {
        for (i, (w, e)) in w.iter().zip(exact(t)).enumerate() {
            worst[i] = worst[i].max((w - e).abs());
        }
    });
    let mut last = [0.0f64; 5];
    follow("TestBraking.ron", 1.0 / 60.0, &names, |t, w| {
        for (i, (w, e)) in w.iter().zip(exact(t)).enumerate() {
            last[i] = (w - e).abs();
        }
    });
    for (i, name) in names.iter().enumerate() {
        eprintln!("{name}: worst {:.3e} at 1 ms, final {:.3e} at 1/60 s (range {:.1})", worst[i], last[i], range[i]);
        assert!(worst[i] <= 2e-3 * range[i], "{name}: {} off the closed form at 1 ms", worst[i]);
        assert!(last[i] <= 5e-2 * range[i], "{name}: ends {} off the closed form at 1/60 s", last[i]);
        if i < 3 {
            assert!(worst[i] <= 1e-8, "{name}: {} off the smooth closed form at 1 ms", worst[i]);
        }
    }
}

/// TestFriction: each inertia (J = 1 kg m^2) is driven by 10 sin(2 pi t) N m from rest.
/// - The bearing friction (1 N m) holds until the torque reaches 1 N m at `tb`, then slides with
///   `w' = 10 sin(2 pi t) - 1` until the speed is zero again at `tz`, where the torque (-8.75 N m)
///   is above the friction, so it slides straight on backwards with `w' = 10 sin(2 pi t) + 1`.
/// - The brake (100 N from 0.5 s, MSL's default mu = 0.5: 50 N m) lets its inertia run free,
///   then stops it at `ts` and holds it.
/// - The clutch (the same 50 N m from 0.5 s) lets inertia2 run free with inertia3 at rest, slides
///   until the two meet at `tl`, then holds them together (5 N m at most, far below 50).
/// - The one-way clutch overruns while the torque is positive (up to 0.5 s), so its pair moves
///   as the clutch's pair does.
#[test]
fn test_friction_follows_the_closed_form_stick_slip() {
    use std::f64::consts::PI;
    let k = 10.0 / (2.0 * PI); // the speed a 10 N m sine gives over half a period, divided by 2
    let tb = 0.1f64.asin() / (2.0 * PI);
    let slide1 = |t: f64| k * ((2.0 * PI * tb).cos() - (2.0 * PI * t).cos()) - (t - tb);
    let tz = root(slide1, 0.3, 0.999);
    let slide2 = |t: f64| k * ((2.0 * PI * tz).cos() - (2.0 * PI * t).cos()) + (t - tz);
    let bearing = |t: f64| phases(t, [tb, tz], [&|_| 0.0, &slide1, &slide2]);
    let free = |t: f64| k * (1.0 - (2.0 * PI * t).cos());
    // From 0.5 s on: the driven inertia with -50 N m of friction, and the clutch's other side.
    let braked = |t: f64| 10.0 / PI - k * (1.0 + (2.0 * PI * t).cos()) - 50.0 * (t - 0.5);
    let ts = root(braked, 0.5, 0.7);
    let tl = root(|t| braked(t) - 50.0 * (t - 0.5), 0.5, 0.7);
    let wl = braked(tl);
    let together = |t: f64| wl + 0.5 * k * ((2.0 * PI * tl).cos() - (2.0 * PI * t).cos());
    let brake = |t: f64| phases(t, [0.5, ts], [&free, &braked, &|_| 0.0]);
    let clutch_in = |t: f64| phases(t, [0.5, tl], [&free, &braked, &together]);
    let clutch_out = |t: f64| phases(t, [0.5, tl], [&|_| 0.0, &|t| 50.0 * (t - 0.5), &together]);
    let exact = |t: f64| [bearing(t), brake(t), clutch_in(t), clutch_out(t)];
    let names = ["inertia", "inertia1", "inertia2", "inertia3", "inertia4", "inertia5"];
    // Every stick and slip instant is located as an event, so the motion is smooth between them
    // and the error is that of the located instants (accelerations up to 60 rad/s^2) and of
    // Gauss collocation of order 4: (2 pi f h)^4 of the 1 Hz sine's 3 rad/s scale, 3e-5 at
    // h = 1/60 s.
    for (dt, tol) in [(1e-3, 1e-8), (1.0 / 60.0, 3e-5)] {
        let mut worst = [0.0f64; 6];
        follow("TestFriction.ron", dt, &names, |t, w| {
            let e = exact(t);
            for (i, e) in e.iter().chain(&e[2..]).enumerate() {
                worst[i] = worst[i].max((w[i] - e).abs());
            }
        });
        for (i, name) in names.iter().enumerate() {
            eprintln!("{name} at dt {dt}: worst {:.3e}", worst[i]);
            assert!(worst[i] <= tol, "{name} at dt {dt}: {} off the closed form (tolerance {tol})", worst[i]);
        }
    }
}

/// TestFrictionPosition: a bearing friction on a flange a Position source moves cannot hold it.
/// Its slip is the source's: the element slides forwards while the source turns forwards and
/// backwards while it turns back, with its 5 N m against the motion, and changes direction
/// where the source's speed is zero (2 pi t + pi/4 = pi/2 and 3 pi/2: 0.125 s and 0.625 s; the
/// other source's at 0.375 s and 0.875 s), never sticking; the source's angle is kept exactly.
#[test]
fn test_friction_position_slides_with_the_prescribed_motion() {
    use std::f64::consts::PI;
    // The source's angle is its speed integrated by Gauss collocation of order 4: rounding at
    // 1 ms, (2 pi h)^4 / 4320 of the 0.1 rad amplitude at 1/60 s. Zero slips are located on
    // the step's dense output: to 1e-8 s at 1 ms, to the 1e-4 s at 1/60 s.
    for (dt, angle_tol, time_tol) in [(1e-3, 1e-12, 1e-8), (1.0 / 60.0, 1e-8, 1e-4)] {
        let (mut ids, mut events, mut worst) = (None, Vec::new(), 0.0f64);
        step_through(&model("TestFrictionPosition.ron"), dt, |sim| {
            let &mut (friction, position, _) = ids
                .get_or_insert_with(|| (id(sim, "bearingFriction"), id(sim, "position"), id(sim, "bearingFriction2")));
            let t = sim.time();
            let (phi, w) = sim.element_relative(position).unwrap();
            worst = worst.max((phi - (0.5 + 0.1 * (2.0 * PI * t + PI / 4.0).sin())).abs());
            let tau = sim.element_torque(friction);
            assert!(tau == 5.0 * w.signum() || w.abs() <= 1e-9, "t {t}: the friction torque {tau} at w {w}");
            for e in sim.events() {
                events.push((e.element, e.from.code(), e.to.code(), e.time));
            }
        });
        let (friction, _, friction2) = ids.unwrap();
        assert!(worst <= angle_tol, "dt {dt}: the source's angle is {worst} rad off");
        let expected =
            [(friction, 1, -1, 0.125), (friction2, -1, 1, 0.375), (friction, -1, 1, 0.625), (friction2, 1, -1, 0.875)];
        assert_eq!(events.iter().filter(|e| e.0 == friction || e.0 == friction2).count(), 4, "dt {dt}: {events:?}");
        for (e, x) in events.iter().filter(|e| e.0 == friction || e.0 == friction2).zip(expected) {
            assert!(
                e.0 == x.0 && e.1 == x.1 && e.2 == x.2 && (e.3 - x.3).abs() <= time_tol,
                "dt {dt}: {e:?}, not {x:?}"
            );
        }
    }
}
