//! A fleet stepped on the calling thread. Alone in its test binary: the plugin's first tick
//! starts a default compute task pool for the process, so no other test may tick before it.

mod common;
use bevy_ecs::prelude::*;
use common::*;
use driveline::bevy::prelude::*;
use driveline::core::vehicle::Road;

/// A fleet on the calling thread (no compute task pool in this binary): from
/// `PARALLEL_WRITE_BACK` vehicles on they write their parts in their step there too, and every
/// part of every car holds its state as the core `Vehicle` driven alike computes it, bit for
/// bit (tests/plugin.rs runs the same check on two compute threads).
#[test]
fn a_fleet_on_the_calling_thread_writes_the_core_state_bit_for_bit() {
    assert!(bevy_tasks::ComputeTaskPool::try_get().is_none(), "this binary runs without a task pool");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let mut core = driveline::core::vehicle::Vehicle::load(&path).unwrap();
    let mut app = create_app();
    let roots: Vec<Entity> =
        (0..20).map(|_| spawn_vehicle(app.world_mut(), core.spec().clone(), Road::Body).unwrap()).collect();
    fleet_parts_hold_the_core_state(&mut app, &mut core, &roots);
}
