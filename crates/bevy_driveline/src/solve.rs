//! The coupled step of the drivelines that are not vehicles, the write-back of the new state to
//! the part entities, and the mode messages.

use crate::{
    BodyState, ClutchEngagement, CouplingState, DrivelineCache, DrivelineStepFailed, FrictionModeChanged,
    HeatPortState, PartOf, PartSlot, SkipWriteBack,
    parts::{Inertia, Mass},
};
use bevy_ecs::prelude::*;
use std::sync::atomic::Ordering::Relaxed;

/// Below this many drivelines a system steps them on the calling thread: handing work to the
/// compute task pool costs some microseconds (waking a worker and joining it), more than a
/// single driveline's step.
pub(crate) const PARALLEL_DRIVELINES: usize = 2;

/// From this many drivelines on, the write-back goes in parallel (see [`write_back`]); below
/// it, driveline by driveline on the calling thread, which keeps one car's tick free of the task
/// pool's hand-offs.
pub(crate) const PARALLEL_WRITE_BACK: usize = 16;

/// The drivelines that are not vehicles, which [`step_drivelines`] steps.
pub(crate) type OtherRoots<'w, 's> =
    Query<'w, 's, (Entity, &'static mut DrivelineCache), Without<crate::vehicle::VehicleController>>;

/// One coupled step of every driveline that is not a vehicle by `dt`, in parallel across the
/// compute task pool (drivelines are independent; each one's result does not depend on the
/// thread). A refused step (a non-finite state) leaves the driveline where it was and is
/// reported, in entity order. Called by `vehicle::step_vehicles` after the vehicles' steps
/// (a system of its own cost a system's run and its resources' fetches every tick).
pub(crate) fn step_drivelines(
    dt: f64,
    roots: &mut OtherRoots,
    failed: &mut crate::outbox::Outbox<'_, DrivelineStepFailed>,
    failures: &mut std::sync::Mutex<Vec<DrivelineStepFailed>>,
    book: &crate::Book,
) {
    // (Whether the write-back has drivelines other than vehicles to write.)
    book.has_others.store(!roots.is_empty(), Relaxed);
    if dt <= 0.0 {
        return;
    }
    let sink = &*failures;
    let step = |(root, mut cache): (Entity, Mut<DrivelineCache>)| {
        let Some(sim) = cache.sim.as_mut() else { return };
        if let Err(e) = sim.step(dt) {
            let f = DrivelineStepFailed { driveline: root, message: e.to_string() };
            sink.lock().unwrap_or_else(|p| p.into_inner()).push(f);
        }
        book.note(root, sim);
    };
    if roots.iter().len() < PARALLEL_DRIVELINES {
        roots.iter_mut().for_each(step);
    } else {
        roots.par_iter_mut().for_each(step);
    }
    flush_failures(failures, failed);
}

/// Writes the messages a parallel system's threads collected (its failures, its refusals),
/// vehicle by vehicle in entity order, each vehicle's in the order its step found them: the
/// same order whatever thread stepped which vehicle (the threads' pushes interleave as they
/// happened to run). `driveline` names a message's vehicle.
pub(crate) fn flush_in_vehicle_order<M: Message, K: Ord>(
    collected: &mut std::sync::Mutex<Vec<M>>,
    out: &mut crate::outbox::Outbox<'_, M>,
    driveline: impl FnMut(&M) -> K,
) {
    let list = collected.get_mut().unwrap_or_else(|p| p.into_inner());
    in_vehicle_order(list, driveline);
    for m in list.drain(..) {
        out.write(m);
    }
}

/// [`flush_in_vehicle_order`]'s order: by vehicle, stable within one (a vehicle's own messages
/// keep their order).
fn in_vehicle_order<M, K: Ord>(list: &mut [M], driveline: impl FnMut(&M) -> K) {
    list.sort_by_key(driveline);
}

/// [`flush_in_vehicle_order`] for step failures.
pub(crate) fn flush_failures(
    failures: &mut std::sync::Mutex<Vec<DrivelineStepFailed>>,
    failed: &mut crate::outbox::Outbox<'_, DrivelineStepFailed>,
) {
    flush_in_vehicle_order(failures, failed, |f| f.driveline);
}

/// [`flush_in_vehicle_order`] for refused edits.
pub(crate) fn flush_refusals(
    refusals: &mut std::sync::Mutex<Vec<crate::DrivelineEditRefused>>,
    refused: &mut crate::outbox::Outbox<'_, crate::DrivelineEditRefused>,
) {
    flush_in_vehicle_order(refusals, refused, |r| r.driveline);
}

/// The bodies the write-back visits: inertias and masses, whose state is a [`BodyState`].
type Bodies<'w, 's> = Query<
    'w,
    's,
    (Entity, &'static PartOf, &'static PartSlot, &'static mut BodyState),
    (Or<(With<Inertia>, With<Mass>)>, Without<SkipWriteBack>),
>;

/// The couplings the write-back visits: every other part, whose state is a [`CouplingState`]
/// (and a [`ClutchEngagement`] on clutches and brakes).
type Couplings<'w, 's> = Query<
    'w,
    's,
    (Entity, &'static PartOf, &'static PartSlot, &'static mut CouplingState, Option<&'static mut ClutchEngagement>),
    (Without<Inertia>, Without<Mass>, Without<SkipWriteBack>),
>;

/// Writes body and coupling states and clutch engagements back to the part entities (in place, no
/// commands; a value that did not change is not written, so change detection sees only what moved).
/// A part's row is visited for the state it has (an inertia has no relative coordinate, a coupling
/// no body state). Below [`PARALLEL_WRITE_BACK`] drivelines, driveline by driveline and in element
/// order on the calling thread (each driveline's simulation is read while it is in the cache); from
/// there on, on two compute threads or more, driveline by driveline too, the drivelines spread over
/// the threads; on one, over the part tables. A fleet's vehicles wrote their parts in their step
/// ([`vehicles_write_parts`]); the other drivelines then go driveline by driveline. Parts marked
/// [`SkipWriteBack`] are not visited. Heat-port readings are written too.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_back(
    ticks: bevy_ecs::system::SystemChangeTick,
    mut book: ResMut<crate::Book>,
    roots: Query<&DrivelineCache>,
    listed: Query<(Entity, &DrivelineCache, Has<crate::vehicle::VehicleController>)>,
    mut index: Local<RootIndex>,
    mut parts: ParamSet<(Bodies, Couplings, FleetParts)>,
    mut heat: Query<(Entity, &PartOf, &PartSlot, &mut HeatPortState), Without<SkipWriteBack>>,
) {
    book.last_write_back = ticks.this_run();
    let book = &*book;
    let roots = &roots;
    write_heat_ports(roots, &mut heat);
    let drivelines = roots.iter().len();
    if drivelines >= PARALLEL_WRITE_BACK {
        let fused = book.vehicles_written.load(Relaxed);
        if fused || fleet_order(drivelines) {
            // A fleet on two threads or more, or one whose vehicles wrote their parts in their
            // step (on any number of threads): each remaining driveline's parts while its
            // simulation is in the cache, the drivelines spread over the threads. Each part is
            // found by its entity, but over the part tables each table holds one or a few parts
            // of each driveline in turn and every simulation comes into the cache again for
            // each kind of part (see docs/performance.md, "Fleets").
            let others = book.has_others.load(Relaxed);
            if !fused || others {
                let mut fleet = parts.p2();
                fleet.prepare();
                write_back_fleet(&listed, fused, &fleet, book);
            }
            return;
        }
        // Drivelines without controllers on one compute thread: the part tables in their own
        // order, dense, each part's driveline found in the roots' index.
        let mut caches = recycle(std::mem::take(&mut index.caches));
        index.fill(&listed, &mut caches);
        let find = |root: Entity| RootIndex::find(&index.at, &caches, root);
        parts.p0().par_iter_mut().for_each(|item| write_body(&find, item));
        parts.p1().par_iter_mut().for_each(|item| write_coupling(&find, item));
        index.caches = recycle(caches);
        return;
    }
    // On the calling thread (Bevy's parallel iteration over a list of entities costs far more
    // than it saves here: measured, tens of microseconds per vehicle-step), one driveline or a
    // few: each one's parts in element order while its simulation is in the cache, straight
    // into the state columns. (One driveline went over the part tables in their order, each
    // part fetched through the queries: about 250 instructions a part, against 40 to 100 here.)
    let mut parts = parts.p2();
    parts.prepare();
    for (root, cache, _) in &listed {
        parts.write(root, cache, book);
    }
}

/// Whether `vehicles` write their parts in their step, right after it ([`write_back`] leaves
/// them then): from [`PARALLEL_WRITE_BACK`] on, on any number of compute threads. On one, the
/// step's run goes through the vehicles in order with the next one's state and part rows
/// hinted toward the cache, which a pass over the part tables afterwards cannot (1,000 8HP
/// sedans, `driveline bench --threads 1`: about a tenth faster, docs/performance.md).
pub(crate) fn vehicles_write_parts(vehicles: usize) -> bool {
    vehicles >= PARALLEL_WRITE_BACK
}

/// Whether `drivelines` are written driveline by driveline over two compute threads or more
/// (the fleet's write-back of drivelines that the vehicles' step did not write).
pub(crate) fn fleet_order(drivelines: usize) -> bool {
    drivelines >= PARALLEL_WRITE_BACK
        && bevy_tasks::ComputeTaskPool::try_get().is_some_and(|pool| pool.thread_num() >= 2)
}

/// The fleet's write-back ([`write_back`]): every driveline's parts in element order, the
/// drivelines in parallel (the vehicles left out when they wrote theirs in their step:
/// `skip_vehicles`).
fn write_back_fleet(
    listed: &Query<(Entity, &DrivelineCache, Has<crate::vehicle::VehicleController>)>,
    skip_vehicles: bool,
    parts: &FleetParts,
    book: &crate::Book,
) {
    listed.par_iter().for_each(|(root, cache, vehicle)| {
        if !(vehicle && skip_vehicles) {
            parts.write(root, cache, book);
        }
    });
}

pub(crate) use crate::columns::FleetParts;

/// The drivelines of a fleet by their root's entity index, for the parallel write-back. A
/// table of parts holds one or a few parts of each driveline in turn, so a memo of the last
/// root rarely hits there, and a query look-up (the entity's location, then its archetype and
/// table) for every kind of part of every driveline cost about a tenth of a fleet's tick
/// (1,000 8HP sedans on two threads, 2026-11-29). Here it is two loads from small arrays.
#[derive(Default)]
pub(crate) struct RootIndex {
    /// Each root's position in `caches`, by the root's entity index (`u32::MAX` or a stale
    /// position for an entity that is not a root now: `find` checks the entity).
    at: Vec<u32>,
    /// The roots and their caches of this tick; between ticks the empty buffer, kept.
    caches: Vec<(Entity, &'static DrivelineCache)>,
}

impl RootIndex {
    /// Lists this tick's roots in `caches` and their positions in `self.at`.
    fn fill<'a>(
        &mut self,
        roots: &'a Query<(Entity, &DrivelineCache, Has<crate::vehicle::VehicleController>)>,
        caches: &mut Vec<(Entity, &'a DrivelineCache)>,
    ) {
        for (root, cache, _) in roots.iter() {
            let i = root.index_u32() as usize;
            if self.at.len() <= i {
                self.at.resize(i + 1, u32::MAX);
            }
            self.at[i] = caches.len() as u32;
            caches.push((root, cache));
        }
    }

    /// The cache of driveline `root`, if it is one of this tick's roots.
    #[inline(always)]
    fn find<'a>(at: &[u32], caches: &[(Entity, &'a DrivelineCache)], root: Entity) -> Option<&'a DrivelineCache> {
        let &(r, cache) = caches.get(*at.get(root.index_u32() as usize)? as usize)?;
        (r == root).then_some(cache)
    }
}

/// An empty vector with `v`'s buffer, for references of another lifetime (a collect in place:
/// the element types have one layout). Keeps the fleet's write-back from allocating a list of
/// its roots every tick.
fn recycle<'b>(mut v: Vec<(Entity, &DrivelineCache)>) -> Vec<(Entity, &'b DrivelineCache)> {
    v.clear();
    v.into_iter().map(|_| unreachable!("the vector is empty")).collect()
}

/// One body's state written back (see [`write_back`]); `find` gives a part's driveline.
#[inline(always)]
fn write_body<'a>(
    find: &impl Fn(Entity) -> Option<&'a DrivelineCache>,
    (entity, part_of, &PartSlot(k), body): (Entity, &PartOf, &PartSlot, Mut<BodyState>),
) {
    let Some(sim) = find(part_of.0).and_then(|c| c.simulation_of(entity, k)) else { return };
    if let Some(state) = sim.body_state(k) {
        set_body(body, state);
    }
}

/// A body's `(angle, speed)`, written where it differs (bit for bit, as the written-states
/// scan compares: `-0.0` is not `0.0` there).
#[inline(always)]
fn set_body(mut body: Mut<BodyState>, (angle, speed): (f64, f64)) {
    let state = BodyState { angle, speed };
    if !same_body(&body, &state) {
        *body = state;
    }
}

/// Whether two body states are the same to the bit (a write-back writes only what moved).
#[inline(always)]
pub(crate) fn same_body(a: &BodyState, b: &BodyState) -> bool {
    a.angle.to_bits() == b.angle.to_bits() && a.speed.to_bits() == b.speed.to_bits()
}

/// Element `k`'s [`CouplingState`] as the simulation has it, if it has a relative coordinate.
#[inline(always)]
pub(crate) fn coupling_state(sim: &driveline_core::Simulation, k: usize) -> Option<CouplingState> {
    match sim.element_outputs(k)? {
        driveline_core::ElementOutputs::Coupling { relative, .. } => relative.map(coupling_of),
        driveline_core::ElementOutputs::Body { .. } => None,
    }
}

/// The [`CouplingState`] of an element's relative outputs.
#[inline(always)]
pub(crate) fn coupling_of(r: driveline_core::RelativeOutputs) -> CouplingState {
    CouplingState { phi_rel: r.phi_rel, w_rel: r.w_rel, torque: r.torque, mode: r.mode, dissipation: r.dissipation }
}

/// One coupling's state written back (see [`write_back`]).
#[inline(always)]
fn write_coupling<'a>(
    find: &impl Fn(Entity) -> Option<&'a DrivelineCache>,
    (entity, part_of, &PartSlot(k), coupling, engagement): (
        Entity,
        &PartOf,
        &PartSlot,
        Mut<CouplingState>,
        Option<Mut<ClutchEngagement>>,
    ),
) {
    let Some(sim) = find(part_of.0).and_then(|c| c.simulation_of(entity, k)) else { return };
    set_coupling(sim, k, coupling, engagement);
}

/// Element `k`'s relative state and engagement, written where they differ.
#[inline(always)]
fn set_coupling(
    sim: &driveline_core::Simulation,
    k: usize,
    mut coupling: Mut<CouplingState>,
    engagement: Option<Mut<ClutchEngagement>>,
) {
    if let Some(state) = coupling_state(sim, k) {
        coupling.set_if_neq(state);
    }
    if let Some(mut e) = engagement
        && let Some(u) = sim.element_engagement(k)
        && e.0.to_bits() != u.to_bits()
    {
        e.0 = u;
    }
}

/// Writes the thermal readings of the parts that carry a [`HeatPortState`] (part of
/// [`write_back`]).
fn write_heat_ports(
    roots: &Query<&DrivelineCache>,
    parts: &mut Query<(Entity, &PartOf, &PartSlot, &mut HeatPortState), Without<SkipWriteBack>>,
) {
    for (entity, part_of, &PartSlot(k), mut state) in parts.iter_mut() {
        let Some(sim) = roots.get(part_of.0).ok().and_then(|c| c.simulation_of(entity, k)) else { continue };
        let Some(temperature) = sim.element_temperature(k) else { continue };
        state.set_if_neq(HeatPortState {
            temperature,
            heat_flow: sim.element_heat_flow(k).unwrap_or(0.0),
            loss_power: sim.element_dissipation(k),
        });
    }
}

/// Sends the mode changes of the last step, and the input values the run-time input policy
/// did not take as given (after the step they applied to), for the drivelines the steps noted
/// (see [`crate::Book`]), in entity order. One system for both: each system a tick runs
/// costs some hundreds of instructions of scheduling. A tick that stepped nothing sends nothing.
pub(crate) fn send_messages(
    roots: Query<(Entity, &DrivelineCache)>,
    mut book: ResMut<crate::Book>,
    mut noted: Local<Vec<Entity>>,
    mut modes: crate::outbox::Outbox<'_, FrictionModeChanged>,
    mut rejected: crate::outbox::Outbox<'_, crate::DrivelineInputRejected>,
) {
    book.notes.drain_into(&mut noted);
    noted.sort_unstable();
    noted.dedup();
    for (root, cache) in noted.drain(..).filter_map(|root| roots.get(root).ok()) {
        let Some(sim) = cache.sim.as_ref() else { continue };
        for e in sim.events() {
            if let Some(&part) = cache.parts.get(e.element) {
                modes.write(FrictionModeChanged { driveline: root, part, time: e.time, from: e.from, to: e.to });
            }
        }
        for r in sim.input_rejections() {
            let input = sim.input_name(r.input).unwrap_or_default().to_string();
            rejected.write(crate::DrivelineInputRejected { driveline: root, input, value: r.value, used: r.used });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refusals pushed by two threads in any interleaving come out the same: by vehicle in
    /// entity order, each vehicle's in the order its own step pushed them.
    #[test]
    fn refusals_come_out_in_vehicle_order_whatever_the_interleaving() {
        let (a, b) = (Entity::from_raw_u32(3).unwrap(), Entity::from_raw_u32(7).unwrap());
        let r = |root: Entity, n: u32| crate::DrivelineEditRefused {
            driveline: Some(root),
            part: Entity::from_raw_u32(100 + n).unwrap(),
            message: format!("#{n}"),
        };
        // (Entity order is `Entity`'s `Ord`, as the failures' and the messages' are.)
        let mut expected = vec![r(a, 0), r(a, 1), r(a, 2), r(b, 0), r(b, 1)];
        if b < a {
            expected.rotate_left(3);
        }
        // Every interleaving of a's three and b's two pushes (a's kept in order, b's too).
        for mask in 0u32..32 {
            if mask.count_ones() != 2 {
                continue;
            }
            let (mut ia, mut ib) = (0, 0);
            let mut list: Vec<_> = (0..5)
                .map(|k| {
                    if mask & 1 << k != 0 {
                        ib += 1;
                        r(b, ib - 1)
                    } else {
                        ia += 1;
                        r(a, ia - 1)
                    }
                })
                .collect();
            in_vehicle_order(&mut list, |r| r.driveline);
            assert_eq!(list, expected, "interleaving {mask:05b}");
        }
    }

    /// The write-back's list of roots keeps its buffer from tick to tick (no allocation a
    /// tick once it has grown).
    #[test]
    fn recycle_keeps_the_buffer() {
        let cache = DrivelineCache::default();
        let mut v: Vec<(Entity, &DrivelineCache)> = Vec::with_capacity(8);
        v.push((Entity::PLACEHOLDER, &cache));
        let (ptr, cap) = (v.as_ptr() as usize, v.capacity());
        let kept: Vec<(Entity, &'static DrivelineCache)> = recycle(v);
        assert!(kept.is_empty());
        assert_eq!((kept.as_ptr() as usize, kept.capacity()), (ptr, cap));
    }
}
