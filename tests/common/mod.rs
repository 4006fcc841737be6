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

/// Drives `roots` (20 8HP sedans of `app`, the eighth marked `SkipWriteBack` here) and `core`
/// alike for 0.9 s, held in Drive and then launched at full throttle, and checks that every
/// part of every car holds its state as `core` computes it, bit for bit (a body that moved
/// marked changed by the last step), and that the skipped car's parts keep their defaults.
pub fn fleet_parts_hold_the_core_state(
    app: &mut bevy_app::App,
    core: &mut driveline::core::vehicle::Vehicle,
    roots: &[bevy_ecs::entity::Entity],
) {
    fleet_parts_hold_the_core_state_with(app, core, roots, |_, _| {});
}

/// [`fleet_parts_hold_the_core_state`], with `before_tick(app, k)` run before tick `k` (a test
/// moves parts to other table rows there, by despawning a car); the cars it despawned are not
/// checked.
pub fn fleet_parts_hold_the_core_state_with(
    app: &mut bevy_app::App,
    core: &mut driveline::core::vehicle::Vehicle,
    roots: &[bevy_ecs::entity::Entity],
    mut before_tick: impl FnMut(&mut bevy_app::App, usize),
) {
    use bevy_ecs::change_detection::DetectChanges;
    use driveline::bevy::prelude::*;
    let skipped = roots[7];
    driveline::bevy::skip_write_back(app.world_mut(), skipped);
    let mut input = driveline::core::DriverInput {
        selector: driveline::core::automatic::Selector::Drive,
        brake: 1.0,
        ..Default::default()
    };
    let mut before_last = app.world().read_change_tick();
    for k in 0..900 {
        before_last = app.world_mut().change_tick();
        if k == 200 {
            input.brake = 0.0;
            input.throttle = 1.0;
        }
        before_tick(app, k);
        core.step(&input, 1e-3).unwrap();
        for &root in roots {
            if let Some(mut driver) = app.world_mut().get_mut::<VehicleInput>(root) {
                driver.0 = input;
            }
        }
        fixed_step(app, std::time::Duration::from_millis(1));
    }
    let alive: Vec<_> = roots.iter().copied().filter(|&r| app.world().get_entity(r).is_ok()).collect();
    let sim = core.simulation();
    let bits = |x: f64| x.to_bits();
    let world = app.world();
    let (mut bodies, mut couplings, mut clutches) = (0, 0, 0);
    for &root in &alive {
        let cache = world.get::<driveline::bevy::DrivelineCache>(root).unwrap();

        for k in 0..sim.network().elements.len() {
            let part = cache.part(k).unwrap();
            let body = world.get::<BodyState>(part);
            let coupling = world.get::<CouplingState>(part);
            if root == skipped {
                assert!(body.is_none_or(|b| *b == BodyState::default()));
                assert!(coupling.is_none_or(|c| *c == CouplingState::default()));
                continue;
            }
            if let Some((angle, speed)) = sim.body_state(k) {
                let b = body.expect("a body part has a BodyState");
                assert_eq!((bits(b.angle), bits(b.speed)), (bits(angle), bits(speed)), "element {k}");
                // A body that moved in the last step is marked changed by it, as a `Mut` write
                // marks it (systems reading `Changed<BodyState>` see it).
                if speed != 0.0 {
                    let changed = world.entity(part).get_ref::<BodyState>().unwrap().last_changed();
                    assert!(changed.is_newer_than(before_last, world.read_change_tick()), "element {k}");
                }
                bodies += 1;
            } else if let Some((phi_rel, w_rel)) = sim.element_relative(k) {
                let c = coupling.expect("a coupling part has a CouplingState");
                assert_eq!((bits(c.phi_rel), bits(c.w_rel)), (bits(phi_rel), bits(w_rel)), "element {k}");
                assert_eq!(bits(c.torque), bits(sim.element_torque(k)), "element {k}");
                assert_eq!(c.mode, sim.element_mode(k), "element {k}");
                couplings += 1;
            }
            if let Some(u) = sim.element_engagement(k) {
                assert_eq!(bits(world.get::<ClutchEngagement>(part).unwrap().0), bits(u), "element {k}");
                clutches += 1;
            }
        }
    }
    // (The cars written, all but the skipped one, each with 19 bodies, 23 couplings with a
    // relative coordinate and 11 clutches and brakes.)
    let written = alive.len() - 1;
    assert_eq!((bodies, couplings, clutches), (written * 19, written * 23, written * 11));
    assert!(core.telemetry().speed > 1.0, "the launch should be under way: {}", core.telemetry().speed);
}
