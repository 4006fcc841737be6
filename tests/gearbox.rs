//! Planetary gearboxes: the ratios the kinematics give against the published figures, the
//! simulated steady state in every gear against the kinematics, and the file checks.

use driveline::core::automatic::GearboxSpec;
use driveline::core::{
    ElementKind, ElementSpec, InputId, IntegrationParameters, Network, NewtonStart, Signal, Simulation,
};
use std::path::{Path, PathBuf};

fn asset(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/gearboxes").join(format!("{name}.ron"))
}

/// Published ratios (3 decimals) per gearbox, forward gears then reverse, from gearboxes.md's
/// sources: ZF 8HP per Wikipedia, ZF 6HP per Wikipedia, ATSG Transmission Math Part II. The
/// Simpson box has our own teeth: its values are worked by hand below.
const PUBLISHED: [(&str, &[(&str, f64)]); 6] = [
    (
        "zf_8hp70",
        &[
            ("1", 4.696),
            ("2", 3.130),
            ("3", 2.104),
            ("4", 1.667),
            ("5", 1.285),
            ("6", 1.000),
            ("7", 0.839),
            ("8", 0.667),
            ("R", -3.297),
        ],
    ),
    (
        "zf_8hp45",
        &[
            ("1", 4.714),
            ("2", 3.143),
            ("3", 2.106),
            ("4", 1.667),
            ("5", 1.285),
            ("6", 1.000),
            ("7", 0.839),
            ("8", 0.667),
            // Not in the reference table: worked by hand with the Willis equations (A, B, D
            // closed: w_R2 = 1.5 w_in; 60 (1.5 w_in) + 96 w_R3 = 156 w_out; 28 w_R3 = 132 w_out).
            ("R", -3.295),
        ],
    ),
    ("zf_6hp26", &[("1", 4.171), ("2", 2.340), ("3", 1.521), ("4", 1.143), ("5", 0.867), ("6", 0.691), ("R", -3.403)]),
    ("ford_aod", &[("1", 2.400), ("2", 1.467), ("3", 1.000), ("4", 0.667), ("R", -2.000)]),
    ("gm_440t4", &[("1", 2.921), ("2", 1.568), ("3", 1.000), ("4", 0.705)]),
    // 1st: 33 w_s + 75 w_out = 0 (rear carrier held), 33 w_s + 75 w_in = 108 w_out -> 183/75;
    // 2nd: sun held -> 108/75; reverse: sun driven, rear carrier held -> -75/33.
    ("simpson_3speed", &[("1", 2.440), ("2", 1.440), ("3", 1.000), ("R", -2.273)]),
];

#[test]
fn kinematic_ratios_reproduce_the_published_ones() {
    for (file, published) in PUBLISHED {
        let spec = GearboxSpec::load(&asset(file)).unwrap_or_else(|e| panic!("{e}"));
        let gears = spec.analyse().unwrap();
        let driving: Vec<_> = GearboxSpec::driving_gears(&gears).collect();
        assert_eq!(driving.len(), published.len(), "{file}: gears");
        for (g, (name, ratio)) in driving.iter().zip(published) {
            assert_eq!(&g.name, name, "{file}");
            // Published to 3 decimals: agreement within half a unit of the last digit.
            assert!((g.ratio - ratio).abs() <= 5e-4 + 1e-12, "{file} gear {name}: {} vs published {ratio}", g.ratio);
        }
    }
}

#[test]
fn simulated_steady_state_in_every_gear_equals_the_kinematics() {
    for (file, _) in PUBLISHED {
        let spec = GearboxSpec::load(&asset(file)).unwrap();
        let gears = spec.analyse().unwrap();
        for gear in GearboxSpec::driving_gears(&gears) {
            // The input runs up to 100 rad/s; a damper loads the output. Closed elements at full
            // force, open ones free.
            let (mut elements, mut connections, input, output) = spec.build("");
            elements.push(ElementSpec {
                name: "drive".into(),
                kind: ElementKind::Speed {
                    w_ref: Signal::Ramp { height: 100.0, duration: 0.5, offset: 0.0, start_time: 0.0 },
                    use_support: false,
                    phi_start: Some(0.0),
                },
            });
            elements.push(ElementSpec {
                name: "load".into(),
                kind: ElementKind::QuadraticSpeedDependentTorque {
                    tau_nominal: -50.0,
                    w_nominal: 100.0,
                    torque_direction: false,
                    use_support: false,
                },
            });
            connections.push(("drive.flange".into(), input));
            connections.push(("load.flange".into(), output.clone()));
            let net = Network::build(&driveline::core::NetworkSpec { elements, connections })
                .unwrap_or_else(|e| panic!("{file} {}: {e}", gear.name));
            let mut sim = Simulation::new(net);
            for (k, e) in spec.elements.iter().enumerate() {
                let closed = gear.closed.contains(&k);
                sim.set_input(&format!("{}.force", e.name), if closed { 1.0 } else { 0.0 }).unwrap();
            }
            for k in 1..=1000 {
                sim.step(k as f64 * 1e-3 - sim.time()).unwrap();
            }
            let w = |name: &str| {
                let i = sim.network().elements.iter().position(|e| e.name == name).unwrap();
                sim.body_state(i).unwrap().1
            };
            let ratio = w(&spec.input.replace('.', "_")) / w(&spec.output.replace('.', "_"));
            // Locked elements hold the kinematic constraint exactly: rounding only.
            assert!(
                (ratio - gear.ratio).abs() < 1e-9 * gear.ratio.abs(),
                "{file} gear {}: simulated {ratio}, kinematic {}",
                gear.name,
                gear.ratio
            );
        }
    }
}

#[test]
fn invalid_gearbox_files_are_reported_before_simulation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gearboxes/invalid");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let err = GearboxSpec::load(&path).err().unwrap_or_else(|| panic!("{} was accepted", path.display()));
        // Every file starts with a comment line: the error must point past it, at the mistake.
        assert!(err.line > 1, "{}: not placed: {err}", path.display());
        assert!(!err.message.is_empty());
        n += 1;
    }
    assert!(n >= 10, "only {n} invalid gearbox files");
}

/// An 8HP gear train driven by a torque input `drive` against a quadratic load, its shift
/// elements' normal forces inputs named `<element>.force`: the network, the input names, and
/// the forces at step `k` (the previous gear's elements ramping down and the next one's up over
/// 40 steps, 400 steps per gear, four driving gears) with the drive torque.
fn shifting_gear_train() -> (Network, Vec<String>, impl Fn(usize) -> (f64, Vec<f64>), usize) {
    let spec = GearboxSpec::load(&asset("zf_8hp70")).unwrap();
    let gears = spec.analyse().unwrap();
    let driving: Vec<_> = GearboxSpec::driving_gears(&gears).take(4).cloned().collect();
    let (mut elements, mut connections, input, output) = spec.build("");
    elements.push(ElementSpec {
        name: "drive".into(),
        kind: ElementKind::Torque {
            tau: Signal::Input { name: "drive".into(), value: 0.0, rate: 0.0, since: 0.0 },
            use_support: false,
        },
    });
    elements.push(ElementSpec {
        name: "load".into(),
        kind: ElementKind::QuadraticSpeedDependentTorque {
            tau_nominal: -200.0,
            w_nominal: 100.0,
            torque_direction: false,
            use_support: false,
        },
    });
    connections.push(("drive.flange".into(), input));
    connections.push(("load.flange".into(), output));
    let net = Network::build(&driveline::core::NetworkSpec { elements, connections }).unwrap();
    let names: Vec<String> = spec.elements.iter().map(|e| format!("{}.force", e.name)).collect();
    let n_el = names.len();
    let steps = 400 * driving.len();
    let inputs = move |k: usize| {
        let (g, s) = (k / 400, (k % 400) as f64 / 40.0);
        let closed = |g: usize, e: usize| driving[g.min(driving.len() - 1)].closed.contains(&e);
        let force = |e: usize| {
            let (was, is) = (g > 0 && closed(g - 1, e), closed(g, e));
            let r = s.min(1.0);
            if was == is {
                if is { 1.0 } else { 0.0 }
            } else if is {
                r
            } else {
                1.0 - r
            }
        };
        (150.0 + 50.0 * ((k / 97) % 3) as f64, (0..n_el).map(force).collect())
    };
    (net, names, inputs, steps)
}

/// An input set by id patches the signal buffers and re-tests only the friction elements it
/// feeds; by name, every signal and capacity is evaluated again. Both must give the same run,
/// bit for bit: an 8HP gear train driven by a torque through clutch-to-clutch shifts (the
/// shift elements' forces ramping over 40 steps, so elements slip, lock, release and free).
#[test]
fn inputs_set_by_id_run_bit_for_bit_like_inputs_set_by_name() {
    let (net, names, inputs, steps) = shifting_gear_train();
    let mut by_name = Simulation::new(net);
    let mut by_id = by_name.clone();
    let ids: Vec<_> = names.iter().map(|n| by_id.input_id(n).unwrap()).collect();
    let drive = by_id.input_id("drive").unwrap();
    let mut events = 0;
    for k in 0..steps {
        let (tau, forces) = inputs(k);
        by_name.set_input("drive", tau).unwrap();
        by_id.set_input_id(drive, tau).unwrap();
        for (e, name) in names.iter().enumerate() {
            by_name.set_input(name, forces[e]).unwrap();
            by_id.set_input_id(ids[e], forces[e]).unwrap();
        }
        let dt = 1e-3;
        by_name.step(dt).unwrap();
        by_id.step(dt).unwrap();
        events += by_id.events().len();
        let bits = |s: &Simulation| s.speeds().iter().chain(s.angles()).map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&by_name), bits(&by_id), "step {k}");
        assert_eq!(by_name.friction_modes(), by_id.friction_modes(), "step {k}");
    }
    // The run must exercise the mode logic, not sit in one mode.
    assert!(events >= 6, "only {events} mode changes");
}

/// The Newton starts, plain extrapolation first.
const STARTS: [NewtonStart; 3] = [NewtonStart::Extrapolate, NewtonStart::FollowInputs, NewtonStart::Forces];

/// One simulation of `net` per Newton start ([`STARTS`]), with the ids of the shift elements'
/// force inputs `names` and of the drive torque.
fn one_per_start(net: &Network, names: &[String]) -> (Vec<Simulation>, Vec<InputId>, InputId) {
    let sims: Vec<Simulation> = STARTS
        .iter()
        .map(|&newton_start| {
            let params = IntegrationParameters { newton_start, ..Default::default() };
            Simulation::with_parameters(net.clone(), params)
        })
        .collect();
    let ids = names.iter().map(|n| sims[0].input_id(n).unwrap()).collect();
    let drive = sims[0].input_id("drive").unwrap();
    (sims, ids, drive)
}

/// The Newton starts ([`NewtonStart`]) change where Newton starts, not where it ends: through
/// the clutch-to-clutch shifts of an 8HP gear train (forces and drive torque stepping at step
/// starts) the runs take the same mode changes at the same instants and keep the same speeds
/// to the Newton tolerance, each in fewer iterations than plain extrapolation.
#[test]
fn newton_starts_save_iterations_and_change_nothing_else() {
    let (net, names, inputs, steps) = shifting_gear_train();
    let (mut sims, ids, drive) = one_per_start(&net, &names);
    let starts = STARTS;
    let (mut worst, mut events) = ([0.0f64; 3], Vec::new());
    // Newton iterations over the steps that start with an input step, per start.
    let (mut stepped, mut last) = ([0u64; 3], inputs(0));
    for k in 0..steps {
        let (tau, forces) = inputs(k);
        let moved = k > 0 && (tau, &forces) != (last.0, &last.1);
        for (sim, count) in sims.iter_mut().zip(&mut stepped) {
            let before = sim.stats().newton_iterations;
            sim.set_input_id(drive, tau).unwrap();
            for (e, &id) in ids.iter().enumerate() {
                sim.set_input_id(id, forces[e]).unwrap();
            }
            sim.step(1e-3).unwrap();
            if moved {
                *count += sim.stats().newton_iterations - before;
            }
        }
        last = (tau, forces);
        let (base, rest) = sims.split_first().unwrap();
        for (s, sim) in rest.iter().enumerate() {
            for (a, b) in sim.speeds().iter().zip(base.speeds()) {
                worst[s + 1] = worst[s + 1].max((a - b).abs() / (1.0 + b.abs()));
            }
            for (a, b) in sim.events().iter().zip(base.events()) {
                assert_eq!((a.element, a.to), (b.element, b.to), "{:?}, step {k}", starts[s + 1]);
                events.push((a.time - b.time).abs());
            }
            assert_eq!(sim.events().len(), base.events().len(), "{:?}, step {k}", starts[s + 1]);
        }
    }
    // Each step converges to 1e-10 (1 + max |q|) of the same collocation solution; the
    // difference stays at that level over the 1,600 steps (a stable system).
    assert!(worst.iter().all(|&w| w < 1e-8), "speeds differ by {worst:?} (relative to 1 + |w|)");
    assert!(events.len() >= 12, "only {} mode changes", events.len());
    // Event times are located to 1e-13 s from states that differ by the Newton tolerance.
    assert!(events.iter().all(|&d| d < 1e-9), "event times differ: {events:?}");
    let [plain, follow, forces] = stepped;
    println!(
        "Newton iterations over the steps with input steps: {plain} extrapolated, {follow} following the inputs, {forces} from forces"
    );
    // (589, 486 and 463 when written; a start that did nothing, or moved the guess the wrong
    // way, would need as many or more as plain extrapolation.)
    assert!((follow as f64) < 0.9 * plain as f64, "{follow} iterations following input steps, {plain} without");
    assert!((forces as f64) < 0.9 * plain as f64, "{forces} iterations from forces, {plain} extrapolated");
}

/// A game steps with the frame time: a sub-step that continues the last one at another size
/// extrapolates the last sub-step's stages and forces by the ratio of the sizes. Through the
/// 8HP gear train's shifts, with step sizes cycling over 0.4 to 3 ms and with 50 ms hitches
/// after 1 ms steps, every start converges at every step, the runs take the same mode
/// changes and keep the same speeds to the Newton tolerance, and the force start needs fewer
/// iterations than plain extrapolation. (Before the force start was held to sub-steps at most
/// four times the last one, the hitch made it diverge to a non-finite state.)
#[test]
fn newton_starts_hold_at_varying_step_sizes() {
    let (net, names, inputs, steps) = shifting_gear_train();
    let starts = STARTS;
    for sizes in [[1e-3, 3e-3, 0.4e-3, 2e-3, 1e-3, 0.7e-3], [1e-3, 1e-3, 1e-3, 5e-2, 1e-4, 1e-3]] {
        let (mut sims, ids, drive) = one_per_start(&net, &names);
        let mut worst: f64 = 0.0;
        let mut events = [0usize; 3];
        for k in 0..steps {
            let (tau, forces) = inputs(k);
            for ((sim, ev), start) in sims.iter_mut().zip(&mut events).zip(starts) {
                sim.set_input_id(drive, tau).unwrap();
                for (e, &id) in ids.iter().enumerate() {
                    sim.set_input_id(id, forces[e]).unwrap();
                }
                let h = sizes[k % sizes.len()];
                sim.step(h).unwrap_or_else(|e| panic!("{start:?}, sizes {sizes:?}, step {k}: {e}"));
                *ev += sim.events().len();
            }
            let (base, rest) = sims.split_first().unwrap();
            for sim in rest {
                for (a, b) in sim.speeds().iter().zip(base.speeds()) {
                    worst = worst.max((a - b).abs() / (1.0 + b.abs()));
                }
            }
        }
        let iterations: Vec<u64> = sims.iter().map(|s| s.stats().newton_iterations).collect();
        println!("sizes {sizes:?}: Newton iterations {iterations:?} (extrapolated, following inputs, from forces)");
        for (sim, start) in sims.iter().zip(starts) {
            assert_eq!(sim.stats().newton_failures, 0, "{start:?}, sizes {sizes:?}: {:?}", sim.stats());
        }
        assert!(events.iter().all(|&e| e == events[0] && e >= 6), "sizes {sizes:?}: mode changes differ: {events:?}");
        // The same collocation solutions to the Newton tolerance, over steps up to 50 ms.
        assert!(worst < 1e-8, "sizes {sizes:?}: speeds differ by {worst:e} (relative to 1 + |w|)");
        // (3550, 3447, 2648 and 3238, 3174, 2667 when written.)
        assert!(iterations[2] < iterations[0], "sizes {sizes:?}: {iterations:?}");
    }
}
