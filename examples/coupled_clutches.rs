//! The MSL CoupledClutches drive train as Bevy entities: spawned from its scenario file in one
//! call, stepped at 1 kHz in `FixedUpdate`, printing every friction mode change with the event
//! time the solver located inside the step.
//!
//! `cargo run --example coupled_clutches`

use bevy_app::{App, FixedUpdate};
use bevy_ecs::message::Messages;
use bevy_ecs::name::Name;
use bevy_time::Time;
use driveline::bevy::prelude::*;
use driveline::core::Scenario;
use std::path::Path;
use std::time::Duration;

fn main() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/scenarios/msl/CoupledClutches.ron");
    let (scenario, _) = Scenario::load_network(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut app = App::new();
    app.add_plugins(DrivelinePlugins::default());
    let root = spawn_scenario(app.world_mut(), &scenario).expect("valid scenario");

    // Drive the fixed schedule by hand: 1500 steps of 1 ms (a real game lets bevy_time do this).
    for _ in 0..1500 {
        app.world_mut().resource_mut::<Time>().advance_by(Duration::from_millis(1));
        app.world_mut().run_schedule(FixedUpdate);
        let changes: Vec<FrictionModeChanged> =
            app.world_mut().resource_mut::<Messages<FrictionModeChanged>>().drain().collect();
        for m in changes {
            let name = app.world().get::<Name>(m.part).expect("part");
            println!("t = {:.9} s  {name}: {:?} -> {:?}", m.time, m.from, m.to);
        }
    }
    let parts = app.world().get::<DrivelineParts>(root).expect("root").parts().to_vec();
    for e in parts {
        // Bodies: the parts with an `Inertia` component.
        if let (Some(name), Some(_), Some(state)) =
            (app.world().get::<Name>(e), app.world().get::<Inertia>(e), app.world().get::<BodyState>(e))
        {
            println!("{name}: w = {:.6} rad/s", state.speed);
        }
    }
}
