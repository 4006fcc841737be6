//! Shared helpers for the integration tests: load a shipped scenario and run it; a headless
//! plugin app ticked by hand; a shipped vehicle's description.
#![allow(dead_code)]

use driveline::core::{ModeEvent, Scenario, Simulation};
use std::path::{Path, PathBuf};

/// Path of a shipped scenario: an MSL example, or else an element scenario.
pub fn msl(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios");
    let msl = root.join("msl").join(format!("{name}.ron"));
    if msl.exists() { msl } else { root.join("elements").join(format!("{name}.ron")) }
}

/// Loads a shipped MSL scenario into a fresh simulation.
pub fn load(name: &str) -> (Scenario, Simulation) {
    let (sc, net) = Scenario::load_network(&msl(name)).unwrap_or_else(|e| panic!("{e}"));
    (sc, Simulation::new(net))
}

/// Element index by name.
pub fn element(sim: &Simulation, name: &str) -> usize {
    sim.network().elements.iter().position(|e| e.name == name).unwrap_or_else(|| panic!("no element {name}"))
}

/// A recorded run: times, per-step values of `probe`, and all mode events.
pub struct Run {
    pub t: Vec<f64>,
    pub v: Vec<Vec<f64>>,
    pub events: Vec<ModeEvent>,
}

/// Runs `name` to `t_end` at step `dt` (stepping to k*dt exactly), sampling `probe` after each step.
pub fn run(name: &str, dt: f64, t_end: f64, probe: impl Fn(&Simulation) -> Vec<f64>) -> (Simulation, Run) {
    let (_, mut sim) = load(name);
    let mut r = Run { t: vec![0.0], v: vec![probe(&sim)], events: Vec::new() };
    let steps = (t_end / dt - 1e-9).ceil() as usize;
    for k in 1..=steps {
        let target = (k as f64 * dt).min(t_end);
        sim.step(target - sim.time()).unwrap();
        r.t.push(sim.time());
        r.v.push(probe(&sim));
        r.events.extend_from_slice(sim.events());
    }
    (sim, r)
}

/// Speed of an inertia by element name.
pub fn speed(sim: &Simulation, name: &str) -> f64 {
    sim.body_state(element(sim, name)).unwrap().1
}

/// `(element name, from code, to code)` of the events, in order.
pub fn sequence(sim: &Simulation, events: &[ModeEvent]) -> Vec<(String, i32, i32)> {
    events.iter().map(|e| (sim.network().elements[e.element].name.clone(), e.from.code(), e.to.code())).collect()
}

/// A headless app with the driveline plugins (their systems in `FixedUpdate`).
pub fn create_app() -> bevy_app::App {
    let mut app = bevy_app::App::new();
    app.add_plugins(driveline::bevy::prelude::DrivelinePlugins::default());
    app
}

/// One fixed tick of `dt`: the time advanced, `FixedUpdate` run.
pub fn fixed_step(app: &mut bevy_app::App, dt: std::time::Duration) {
    app.world_mut().resource_mut::<bevy_time::Time>().advance_by(dt);
    app.world_mut().run_schedule(bevy_app::FixedUpdate);
}

/// The description of a shipped vehicle, `assets/vehicles/<file>`.
pub fn vehicle_spec(file: &str) -> driveline::core::VehicleSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles").join(file);
    driveline::core::Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}")).spec().clone()
}
