//! Whether the vehicles' `Control` and `Actuation` phases may run inside their step.
//!
//! A vehicle's tick is three passes over the vehicles: [`crate::vehicle::control_vehicles`]
//! in `Control`, the actuators in `Actuation`, the coupled step in `Solve`. Each pass touches
//! every vehicle's controllers and simulation again, and in a fleet those are out of the cache
//! by the next pass. When no other system of the schedule can run between the first pass and
//! the step, the three are one: the step takes the whole chain (control, actuation, solve,
//! as `driveline_core::Vehicle::step` does), which gives the same bits and visits each vehicle
//! once. Which of the two a schedule gets is decided each time Bevy builds it, by a build pass
//! over its dependency graph ([`PhasePass`]); [`FusedVehicleSteps`] tells the result.

use bevy_ecs::prelude::*;
use bevy_ecs::schedule::graph::{DiGraph, Direction};
use bevy_ecs::schedule::{
    FlattenedDependencies, NodeId, ScheduleBuildError, ScheduleBuildPass, ScheduleGraph, SystemKey, SystemSetKey,
};
use bevy_ecs::system::{IntoSystem, System};
use bevy_platform::hash::FixedHasher;
use indexmap::IndexSet;
use std::any::TypeId;

/// Whether the vehicles' `Control` and `Actuation` phases run inside their step in `Solve`
/// (one pass over the vehicles a tick instead of three; the same results to the bit).
///
/// The plugin sets it each time its schedule is built. It is `true` when every other system
/// of the schedule runs before [`crate::vehicle::control_vehicles`] or after the vehicles'
/// step by the schedule's ordering (in `Input` or `Prepare`, in `Integrate` or `Telemetry`, or
/// ordered so), and no run condition sits on the phases' systems or their sets. A system of
/// yours in `Control` after the controllers, in `Actuation`, between `Actuation` and `Solve`,
/// or not ordered against the sets at all makes it `false`: the phases then run as systems in
/// their sets, so that your system sees the controllers' and actuators' work of this tick
/// where it runs (for example the engagements the actuators wrote).
///
/// Read it to know which path a schedule takes (a fleet's throughput differs, its results do
/// not); it cannot be set.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq, bevy_reflect::Reflect)]
#[reflect(Resource)]
pub struct FusedVehicleSteps(pub(crate) bool);

impl FusedVehicleSteps {
    /// `true`: the phases run inside the step (see the type's docs).
    pub fn is_fused(&self) -> bool {
        self.0
    }
}

/// The build pass that sets [`FusedVehicleSteps`] for the plugin's schedule.
#[derive(Debug, Default)]
pub(crate) struct PhasePass;

impl ScheduleBuildPass for PhasePass {
    type EdgeOptions = ();

    fn add_dependency(&mut self, _from: NodeId, _to: NodeId, _options: Option<&Self::EdgeOptions>) {}

    fn collapse_set(
        &mut self,
        _set: SystemSetKey,
        _systems: &IndexSet<SystemKey, FixedHasher>,
        _dependency_flattening: &DiGraph<NodeId>,
    ) -> impl Iterator<Item = (NodeId, NodeId)> {
        std::iter::empty()
    }

    fn build(
        &mut self,
        world: &mut World,
        graph: &mut ScheduleGraph,
        dependency_flattened: FlattenedDependencies<'_>,
    ) -> Result<(), ScheduleBuildError> {
        let fused = fusable(graph, &dependency_flattened);
        world.insert_resource(FusedVehicleSteps(fused));
        world.get_resource_or_init::<crate::Book>().fused = fused;
        Ok(())
    }
}

/// The type of a system made from `f`.
fn type_of<M>(f: impl IntoSystem<(), (), M>) -> TypeId {
    IntoSystem::into_system(f).system_type()
}

/// Whether `graph` lets the phases run inside the step (see [`FusedVehicleSteps`]).
fn fusable(graph: &ScheduleGraph, flat: &DiGraph<SystemKey>) -> bool {
    let (control, step) = (type_of(crate::vehicle::control_vehicles), type_of(crate::vehicle::step_vehicles));
    // The plugin's own systems between the two: the actuators (which leave their work to the
    // step when fused), the written states taken again (which do not run then: no system
    // between could have written one) and the hand-over.
    let actuate = type_of(crate::vehicle::actuate_vehicles);
    let between = [actuate, type_of(crate::sync::write_states), type_of(crate::sync::hand_over)];
    let find = |t: TypeId| {
        let mut keys = graph.systems.iter().filter(|(_, s, _)| s.system_type() == t).map(|(k, ..)| k);
        match (keys.next(), keys.next()) {
            (Some(k), None) => Some(k),
            _ => None,
        }
    };
    let (Some(c), Some(s)) = (find(control), find(step)) else { return false };
    let before = reach(flat, c, Direction::Incoming);
    let after = reach(flat, s, Direction::Outgoing);
    if graph.systems.iter().any(|(key, system, _)| {
        key != c
            && key != s
            && !before.contains(&key)
            && !after.contains(&key)
            && !between.contains(&system.system_type())
    }) {
        return false;
    }
    // A run condition on a phase (or on a set holding it) could skip that phase alone.
    let Some(a) = find(actuate) else { return false };
    ![c, a, s].into_iter().any(|k| has_conditions(graph, NodeId::System(k)))
}

/// The systems reached from `from` along `dir` in the flattened dependency graph.
fn reach(flat: &DiGraph<SystemKey>, from: SystemKey, dir: Direction) -> bevy_platform::collections::HashSet<SystemKey> {
    let mut seen = bevy_platform::collections::HashSet::default();
    let mut stack = vec![from];
    while let Some(k) = stack.pop() {
        for n in flat.neighbors_directed(k, dir) {
            if seen.insert(n) {
                stack.push(n);
            }
        }
    }
    seen
}

/// Whether `node` or a set above it has run conditions.
fn has_conditions(graph: &ScheduleGraph, node: NodeId) -> bool {
    let own = match node {
        NodeId::System(k) => graph.systems.has_conditions(k),
        NodeId::Set(k) => graph.system_sets.has_conditions(k),
    };
    own || graph
        .hierarchy()
        .graph()
        .neighbors_directed(node, Direction::Incoming)
        .any(|parent| has_conditions(graph, parent))
}
