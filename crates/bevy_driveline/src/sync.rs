//! Keeping each driveline's simulation in step with its part components, before the step:
//! edits of the typed components accepted or refused, parameter edits applied in place,
//! structural changes rebuilt warm, run-time inputs and clutch engagements handed over, and
//! written body states taken as the state the step starts from.

use crate::parts::{ElementComponent, PartElement};
use crate::{
    BodyState, ClutchEngagement, Connections, Driveline, DrivelineBuildFailed, DrivelineCache, DrivelineEditRefused,
    DrivelineInputs, DrivelineParts, DrivelineRebuilt, PartOf, PartSlot, StateWriteAdjusted,
};
use bevy_ecs::name::Name;
use bevy_ecs::prelude::*;
use bevy_ecs::world::World;
use driveline_core::network::validate_element;
use driveline_core::{ElementSpec, Network, NetworkSpec, Simulation, StateWrite, UpdateError};

/// The name of a part: its [`Name`], or one made from its entity.
pub(crate) fn part_name(entity: Entity, name: Option<&Name>) -> String {
    name.map_or_else(|| format!("part {entity}"), |n| n.as_str().to_string())
}

/// Accepts the edits of every typed part component (see [`accept`]). First in the plugin's
/// tick, it also starts a default compute task pool if none runs: the later systems spread
/// their drivelines over it, and a multi-threaded executor or `TaskPoolPlugin` starts one, but
/// a single-threaded fixed schedule in a bare `App` does not.
///
/// An exclusive system: it keeps one query of changes per typed component (some fifty), brings
/// them up to date only when the world has new archetypes, and reads only those of the types
/// some part has. As system parameters, the fifty queries cost their fetch every tick whether
/// any part has the type or not (about 3,000 instructions a tick for one car).
pub(crate) fn collect_edits(world: &mut World, mut scan: Local<Option<EditScans>>) {
    bevy_tasks::ComputeTaskPool::get_or_init(bevy_tasks::TaskPool::default);
    let scan = scan.get_or_insert_with(|| EditScans::new(world));
    scan.changed.clear();
    let generation = world.archetypes().generation();
    if scan.generation != Some(generation) {
        scan.generation = Some(generation);
        scan.present.clear();
        for (k, s) in scan.scans.iter_mut().enumerate() {
            if s.update(world) {
                scan.present.push(k);
            }
        }
    }
    for &k in &scan.present {
        scan.scans[k].changed(world, k, &mut scan.changed);
    }
    let mut refused = Vec::new();
    for &(entity, k) in &scan.changed {
        scan.scans[k].accept(world, entity, &mut refused);
    }
    if !refused.is_empty() {
        world.write_message_batch(refused);
    }
}

/// The state of [`collect_edits`].
pub(crate) struct EditScans {
    /// One per typed component.
    scans: Vec<Box<dyn EditScan>>,
    /// The archetypes the scans were brought up to date with.
    generation: Option<bevy_ecs::archetype::ArchetypeGeneration>,
    /// The scans of the types some entity has.
    present: Vec<usize>,
    /// This tick's changed components: `(entity, scan)`.
    changed: Vec<(Entity, usize)>,
}

impl EditScans {
    fn new(world: &mut World) -> Self {
        Self { scans: crate::parts::typed_scans(world), generation: None, present: Vec::new(), changed: Vec::new() }
    }
}

/// The changes of one typed part component (see [`collect_edits`]).
pub(crate) trait EditScan: Send + Sync {
    /// Brings the scan up to date with the world's archetypes; whether any entity has the type.
    fn update(&mut self, world: &World) -> bool;
    /// Pushes the entities whose component changed since the system last ran, each with
    /// `index` (this scan's place in the list).
    fn changed(&self, world: &World, index: usize, out: &mut Vec<(Entity, usize)>);
    /// Accepts or refuses the component of `entity` (see [`accept`]).
    fn accept(&self, world: &mut World, entity: Entity, refused: &mut Vec<DrivelineEditRefused>);
}

/// The [`EditScan`] of the typed component `T`.
pub(crate) struct TypedScan<T: ElementComponent> {
    query: bevy_ecs::query::QueryState<Entity, Changed<T>>,
    /// The tables with a column of `T`, when it is stored in tables (the pre-check reads their
    /// change ticks).
    in_tables: Option<crate::columns::TablesWith>,
}

impl<T: ElementComponent> TypedScan<T> {
    /// The scan of `T`.
    pub(crate) fn new(world: &mut World) -> Self {
        let id = world.register_component::<T>();
        let in_tables = crate::columns::stored_in_tables(world, id).then(|| crate::columns::TablesWith::new(id));
        Self { query: bevy_ecs::query::QueryState::new(world), in_tables }
    }
}

impl<T: ElementComponent> EditScan for TypedScan<T> {
    fn update(&mut self, world: &World) -> bool {
        self.query.update_archetypes(world);
        if let Some(tables) = &mut self.in_tables {
            tables.refresh(&world.storages().tables);
        }
        self.query.matched_tables().next().is_some() || self.query.matched_archetypes().next().is_some()
    }

    fn changed(&self, world: &World, index: usize, out: &mut Vec<(Entity, usize)>) {
        // Since the system last ran: an exclusive system's world reports that run as its last
        // change tick. (Most ticks no `T` changed anywhere: a pass over the change ticks says
        // so before the query's pass over the parts.)
        let (last_run, this_run) = (world.last_change_tick(), world.read_change_tick());
        // (A table is added only with a new archetype, after which `update` runs first; a list
        // not current is a world changed some other way, and is not trusted.)
        if let Some(listed) = &self.in_tables
            && listed.is_current(&world.storages().tables)
            && !listed.any_changed(world, last_run, this_run)
        {
            return;
        }
        out.extend(self.query.iter_manual(world).map(|e| (e, index)));
    }

    fn accept(&self, world: &mut World, entity: Entity, refused: &mut Vec<DrivelineEditRefused>) {
        accept::<T>(world, entity, refused);
    }
}

/// Accepts the edit of the typed component `T` of `entity`: a value that validates becomes the
/// part's [`PartElement`]; one that does not is refused with a message naming the part and the
/// field, and the component is set back to the last accepted value.
pub(crate) fn accept<T: ElementComponent>(world: &mut World, entity: Entity, refused: &mut Vec<DrivelineEditRefused>) {
    let (Some(typed), Some(element)) = (world.get::<T>(entity), world.get::<PartElement>(entity)) else { return };
    let kind = typed.to_kind();
    if element.kind() == Some(&kind) {
        return;
    }
    let label = part_name(entity, world.get::<Name>(entity));
    match validate_element(&label, &kind) {
        Ok(()) => {
            if let Some(mut element) = world.get_mut::<PartElement>(entity) {
                element.set(kind);
            }
            // The sync updates this driveline's parameters (it does not scan the elements).
            let root = world.get::<PartOf>(entity).map(|p| p.0);
            if let Some(root) = root
                && let Some(mut cache) = world.get_mut::<DrivelineCache>(root)
            {
                cache.bypass_change_detection().edited = true;
                crate::Book::mark(&mut world.into(), root);
            }
        }
        Err(e) => {
            let mut message = e.to_string();
            for (file, field) in T::RENAMES {
                message = message.replace(&format!("`{file}`"), &format!("`{field}`"));
            }
            let kept = element.kind().and_then(T::from_kind);
            let message = match &kept {
                Some(_) => format!("{message}; the last valid value is kept"),
                None => format!("{message}; the part has no valid value yet"),
            };
            let driveline = world.get::<PartOf>(entity).map(|p| p.0);
            refused.push(DrivelineEditRefused { driveline, part: entity, message });
            if let Some(last) = kept
                && let Some(mut typed) = world.get_mut::<T>(entity)
            {
                *typed = last;
            }
        }
    }
}

/// Brings every driveline's simulation in step with its parts: built at first, parameter
/// edits applied in place (the motion, the clock and the controllers kept), a structural
/// change (a part added or removed, a joint or a name changed, an edit the solver cannot take
/// in place) rebuilt warm, and said so in a [`DrivelineRebuilt`] message.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sync_networks(
    mut roots: Query<(Entity, &Driveline, &DrivelineParts, &mut DrivelineCache)>,
    changed_roots: Query<Entity, Or<(Changed<DrivelineParts>, Changed<Driveline>)>>,
    (changed, renamed, rejoined, listed, configured): (
        Query<&PartOf, (Or<(Changed<Name>, Changed<Connections>)>, With<PartElement>)>,
        crate::columns::AnyChanged<Name>,
        crate::columns::AnyChanged<Connections>,
        crate::columns::AnyChanged<DrivelineParts>,
        crate::columns::AnyChanged<Driveline>,
    ),
    parts: Query<(Option<&Name>, &PartElement, Option<&Connections>)>,
    mut removed: RemovedComponents<PartElement>,
    mut detached: RemovedComponents<PartOf>,
    mut failed: crate::outbox::Outbox<'_, DrivelineBuildFailed>,
    mut rebuilt: crate::outbox::Outbox<'_, DrivelineRebuilt>,
    (mut book, mut touched, mut unbuilt, mut visit, mut lost): (
        ResMut<crate::Book>,
        Local<Vec<Entity>>,
        Local<Vec<Entity>>,
        Local<Vec<Entity>>,
        Local<Vec<Entity>>,
    ),
    mut commands: Commands,
) {
    // The drivelines that lost a part (its element or its membership removed, the part
    // despawned): the root whose last build listed it. The others are left alone.
    let lost = &mut *lost;
    lost.clear();
    lost.extend(removed.read().chain(detached.read()).filter_map(|part| book.claim_of(part)));
    lost.sort_unstable();
    lost.dedup();
    // The roots of parts renamed or joined anew (structural), gathered in one pass over the
    // parts (asking each root "is one of the changed parts mine?" would scan every part once
    // per root). An element inserted (a new part) or accepted in place (a parameter edit)
    // marks its driveline's cache instead: see `PartElement` and `accept`.
    let structure = &mut *touched;
    structure.clear();
    // (Most ticks nothing was renamed or joined anew anywhere: a pass over the change ticks
    // says so before the query's pass over the parts.)
    if renamed.any() || rejoined.any() {
        structure.extend(changed.iter().map(|p| p.0));
    }
    structure.sort_unstable();
    structure.dedup();
    // The roots to look at: those marked, changed, touched or that lost a part, and those whose
    // network is not built yet (a build that failed is tried again every tick). A fleet's tick
    // visits none of its roots when nothing changed.
    visit.clear();
    visit.append(&mut book.marks);
    // (Likewise the roots' change ticks before the query's pass over the roots.)
    if listed.any() || configured.any() {
        visit.extend(changed_roots.iter());
    }
    visit.extend(structure.iter().copied());
    visit.extend(lost.iter().copied());
    visit.append(&mut unbuilt);
    visit.sort_unstable();
    visit.dedup();
    for &root in visit.iter() {
        let Ok((root, driveline, members, mut cache)) = roots.get_mut(root) else { continue };
        let marks = cache.bypass_change_detection();
        let (is_edited, restructured) = (std::mem::take(&mut marks.edited), std::mem::take(&mut marks.restructured));
        let is_structural = cache.sim.is_none()
            || lost.binary_search(&root).is_ok()
            || restructured
            || changed_roots.contains(root)
            || structure.binary_search(&root).is_ok();
        if !(is_structural || is_edited) || members.0.is_empty() {
            continue;
        }
        let spec = match gather(root, members, &parts) {
            Ok(spec) => spec,
            Err(message) => {
                cache.sim = None;
                failed.write(DrivelineBuildFailed { driveline: root, message });
                continue;
            }
        };
        let mut reason = None;
        if !is_structural && let Some(sim) = cache.sim.as_mut() {
            match sim.update_parameters(&spec) {
                Ok(()) => continue,
                Err(UpdateError::Build(e)) => {
                    failed.write(DrivelineBuildFailed { driveline: root, message: e.to_string() });
                    continue;
                }
                Err(UpdateError::Structure(why)) => reason = Some(why),
            }
        }
        let had = cache.sim.is_some();
        match build(&spec, cache.sim.as_ref(), driveline) {
            Ok((sim, warm)) => {
                cache.sim = Some(sim);
                cache.generation += 1;
                let listed: Vec<Entity> = members.0.iter().copied().filter(|e| parts.contains(*e)).collect();
                book.claim(root, &cache.parts, &listed);
                cache.parts = listed;
                cache.places = cache.parts.iter().map(|_| u64::MAX.into()).collect();
                cache.claimed_whole = u64::MAX.into();
                cache.marks = u64::MAX.into();
                for (k, &e) in cache.parts.iter().enumerate() {
                    commands.entity(e).try_insert(PartSlot(k));
                }
                if had {
                    let reason = reason.unwrap_or_else(|| "parts were added, removed, joined or renamed".into());
                    rebuilt.write(DrivelineRebuilt { driveline: root, warm, reason });
                }
            }
            Err(message) => {
                cache.sim = None;
                failed.write(DrivelineBuildFailed { driveline: root, message });
            }
        }
    }
    // What is still not built is looked at again next tick.
    unbuilt.extend(
        visit.iter().filter(|&&r| {
            roots.get(r).is_ok_and(|(_, _, members, cache)| cache.sim.is_none() && !members.0.is_empty())
        }),
    );
}

/// The network description of a root's parts, in part order.
fn gather(
    root: Entity,
    members: &DrivelineParts,
    parts: &Query<(Option<&Name>, &PartElement, Option<&Connections>)>,
) -> Result<NetworkSpec, String> {
    let mut spec = NetworkSpec::default();
    let mut names: Vec<(Entity, String)> = Vec::with_capacity(members.0.len());
    for &e in &members.0 {
        if let Ok((name, ..)) = parts.get(e) {
            names.push((e, part_name(e, name)));
        }
    }
    names.sort_unstable_by_key(|n| n.0);
    let name_of = |e: Entity| names.binary_search_by_key(&e, |n| n.0).ok().map(|i| names[i].1.clone());
    for &e in &members.0 {
        let Ok((name, element, conns)) = parts.get(e) else { continue };
        let name = part_name(e, name);
        let Some(kind) = element.kind().cloned() else {
            return Err(format!("part '{name}' of driveline {root} has no valid element (see the refused edit)"));
        };
        for c in conns.map(|c| c.0.as_slice()).unwrap_or_default() {
            let Some(other) = name_of(c.to) else {
                return Err(format!("'{name}' connects to an entity outside its driveline"));
            };
            spec.connections.push((format!("{name}.{}", c.flange), format!("{other}.{}", c.to_flange)));
        }
        spec.elements.push(ElementSpec { name, kind });
    }
    Ok(spec)
}

/// A new simulation of `spec`, warm from `old` where it can be (parts that existed keep their
/// motion and the clock runs on), else from the start values. Returns it and whether it is warm.
fn build(spec: &NetworkSpec, old: Option<&Simulation>, driveline: &Driveline) -> Result<(Simulation, bool), String> {
    let warm = old.and_then(|old| {
        let mut warm_spec = spec.clone();
        for e in &mut warm_spec.elements {
            if let Some(k) = old.network().elements.iter().position(|o| o.name == e.name) {
                e.kind.set_start_state(old.body_state(k), old.element_relative(k));
            }
        }
        Network::build(&warm_spec).ok().map(|net| (net, old.time()))
    });
    match warm {
        Some((net, t0)) => Ok((Simulation::starting_at(net, driveline.parameters, t0), true)),
        None => Network::build(spec)
            .map(|net| (Simulation::starting_at(net, driveline.parameters, 0.0), false))
            .map_err(|e| e.to_string()),
    }
}

/// Hands the inputs of each root to its simulation under the run-time input policy (a value
/// it clamps or a NaN it refuses is reported once per episode by [`crate::DrivelineInputRejected`]
/// after the step); an input the network does not have is reported here.
///
/// Then hands written clutch engagements over (see [`apply_engagements`]); one system for
/// both, as each system a tick runs costs some hundreds of instructions of scheduling.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub(crate) fn hand_over(
    ticks: bevy_ecs::system::SystemChangeTick,
    book: Res<crate::Book>,
    mut roots: Roots,
    mut parts: ParamSet<(
        crate::columns::AnyChanged<ClutchEngagement>,
        Query<(Entity, &PartOf, &PartSlot, &mut ClutchEngagement), Changed<ClutchEngagement>>,
    )>,
    fresh: Query<(), Added<PartSlot>>,
    mut failed: crate::outbox::Outbox<'_, DrivelineBuildFailed>,
    mut refused: crate::outbox::Outbox<'_, DrivelineEditRefused>,
) {
    apply_inputs(&mut roots, &mut failed);
    // The actuators' and the step's own writes change engagements every tick, so `Changed`
    // matches many: a pass over the change ticks first says whether any was written after
    // the last write-back (nearly never), before the query's pass over them.
    if parts.p0().any_after_all(&[book.last_write_back]) {
        apply_engagements(ticks, book.last_write_back, &mut roots, &mut parts.p1(), &fresh, &mut refused, book.fused);
    }
}

/// The roots as [`hand_over`] sees them.
type Roots<'w, 's> = Query<
    'w,
    's,
    (Entity, &'static DrivelineInputs, &'static mut DrivelineCache, Option<&'static mut crate::vehicle::Overrides>),
>;

/// The inputs part of [`hand_over`].
fn apply_inputs(roots: &mut Roots, failed: &mut crate::outbox::Outbox<'_, DrivelineBuildFailed>) {
    for (root, inputs, mut cache, mut overrides) in roots.iter_mut() {
        // Most roots have no inputs: their caches are not touched (nor marked changed).
        if inputs.0.is_empty() {
            continue;
        }
        let Some(sim) = cache.sim.as_mut() else { continue };
        for (name, value) in &inputs.0 {
            // A vehicle's: written over its controllers' and actuators' inputs in every
            // sub-step of the coming step.
            let result = match (overrides.as_deref_mut(), sim.input_id(name)) {
                (Some(o), Some(id)) => {
                    o.inputs.push((id, *value));
                    Ok(())
                }
                _ => sim.set_input(name, *value),
            };
            if let Err(e @ driveline_core::InputError::Unknown(_)) = result {
                failed.write(DrivelineBuildFailed { driveline: root, message: e.to_string() });
            }
        }
    }
}

/// The engagements part of [`hand_over`]: hands written clutch engagements to the simulations:
/// a [`ClutchEngagement`] changed since
/// the write-back was written by a user, and it sets the clutch's run-time input (clamped to
/// [0, 1]; NaN refused, the last valid value kept). On a vehicle it overrides the built-in
/// actuator for the coming step, sub-steps included (see
/// `driveline_core::vehicle::VehicleControl::step_with`).
fn apply_engagements(
    ticks: bevy_ecs::system::SystemChangeTick,
    last: bevy_ecs::change_detection::Tick,
    roots: &mut Roots,
    parts: &mut Query<(Entity, &PartOf, &PartSlot, &mut ClutchEngagement), Changed<ClutchEngagement>>,
    fresh: &Query<(), Added<PartSlot>>,
    refused: &mut crate::outbox::Outbox<'_, DrivelineEditRefused>,
    fused: bool,
) {
    for (entity, part_of, &PartSlot(k), mut engagement) in parts.iter_mut() {
        // Parts just built start from their components' values; a spawn is not a write.
        if fresh.contains(entity) || !engagement.last_changed().is_newer_than(last, ticks.this_run()) {
            continue;
        }
        let Ok((_, _, mut cache, overrides)) = roots.get_mut(part_of.0) else { continue };
        if cache.parts.get(k) != Some(&entity) {
            continue;
        }
        let Some(sim) = cache.sim.as_mut() else { continue };
        let Some(used) = sim.element_engagement(k) else { continue };
        let value = engagement.0;
        let name = &sim.network().elements[k].name;
        let input = sim.engagement_input(k);
        let problem = match input {
            None => Some(format!(
                "'{name}': ClutchEngagement is written, but its `f_normalized` is a function of time, not a run-time input; the value is kept"
            )),
            Some(_) if value.is_nan() => Some(format!(
                "'{name}': ClutchEngagement is NaN; it must be a number in [0, 1]; the last valid value {used} is kept"
            )),
            Some(_) => None,
        };
        let (Some(id), None) = (input, &problem) else {
            let message = problem.unwrap_or_default();
            refused.write(DrivelineEditRefused { driveline: Some(part_of.0), part: entity, message });
            engagement.bypass_change_detection().0 = used;
            continue;
        };
        // A vehicle's actuator wrote this value in `Actuation`: not an override. (When the
        // step actuates, nothing but a user wrote it since the write-back.)
        if !fused && value.to_bits() == sim.input_value(id).to_bits() && overrides.is_some() {
            continue;
        }
        match overrides {
            Some(mut o) => o.engagements.push((id, value)),
            None => {
                let _ = sim.set_input_id(id, value.clamp(0.0, 1.0));
            }
        }
    }
}

/// Takes written [`BodyState`]s as the state the next step starts from: a body whose state
/// differs from what the last step left (bit for bit) was written, and the simulation starts
/// from the nearest consistent state (see `Simulation::write_state`); values it could not take
/// as written are reported in [`StateWriteAdjusted`] messages. Parts just (re)built are not
/// writes: their start values come from their typed components.
pub(crate) fn write_states(
    ticks: bevy_ecs::system::SystemChangeTick,
    mut book: ResMut<crate::Book>,
    mut roots: Query<&mut DrivelineCache>,
    written: Query<
        (Entity, Ref<BodyState>),
        (Changed<BodyState>, Or<(With<crate::Inertia>, With<crate::parts::Mass>)>),
    >,
    parts: Query<(&PartOf, &PartSlot)>,
    fresh: Query<(), Added<PartSlot>>,
    mut adjusted: crate::outbox::Outbox<'_, StateWriteAdjusted>,
    mut refused: crate::outbox::Outbox<'_, DrivelineEditRefused>,
    (mut writes, any_written): (Local<Vec<(Entity, usize, Entity, BodyState)>>, crate::columns::AnyChanged<BodyState>),
) {
    writes.clear();
    let (now, since) = (ticks.this_run(), std::mem::replace(&mut book.states_taken, ticks.this_run()));
    let last = book.last_write_back;
    // Every moving body's state changes each tick (the write-back's), so `Changed` matches them
    // all: a pass over the change ticks first says whether any was written after the last
    // write-back and after the last take (nearly never), before the query's pass over them.
    if !any_written.any_after_all(&[last, since]) {
        return;
    }
    for (entity, state) in &written {
        // Changed after the last write-back: a user wrote it (the write-back's own writes
        // carry its tick); and not taken yet (`Prepare` takes what was written before it,
        // `Solve` what was written since). Parts just built start from their components'
        // start values. (The part's slot is read only then: the write-back changes every
        // moving body's state each tick.)
        let changed = state.last_changed();
        if !changed.is_newer_than(last, now) || !changed.is_newer_than(since, now) || fresh.contains(entity) {
            continue;
        }
        let Ok((part_of, &PartSlot(k))) = parts.get(entity) else { continue };
        let Ok(cache) = roots.get(part_of.0) else { continue };
        if cache.parts.get(k) != Some(&entity) {
            continue;
        }
        let Some((angle, speed)) = cache.sim.as_ref().and_then(|s| s.body_state(k)) else { continue };
        if angle.to_bits() != state.angle.to_bits() || speed.to_bits() != state.speed.to_bits() {
            writes.push((part_of.0, k, entity, *state.into_inner()));
        }
    }
    if writes.is_empty() {
        return;
    }
    writes.sort_unstable_by_key(|w| (w.0, w.1));
    let mut at = 0;
    while at < writes.len() {
        let root = writes[at].0;
        let end = at + writes[at..].iter().take_while(|w| w.0 == root).count();
        let group = &writes[at..end];
        at = end;
        let Ok(mut cache) = roots.get_mut(root) else { continue };
        let Some(sim) = cache.sim.as_mut() else { continue };
        let list: Vec<StateWrite> = group
            .iter()
            .map(|&(_, k, _, s)| {
                let (angle, speed) = sim.body_state(k).unwrap_or_default();
                StateWrite {
                    element: k,
                    angle: (angle.to_bits() != s.angle.to_bits()).then_some(s.angle),
                    speed: (speed.to_bits() != s.speed.to_bits()).then_some(s.speed),
                }
            })
            .collect();
        match sim.write_state(&list) {
            Ok(report) => {
                for a in report {
                    let part = group.iter().find(|w| w.1 == a.element).map_or(Entity::PLACEHOLDER, |w| w.2);
                    adjusted.write(StateWriteAdjusted {
                        driveline: root,
                        part,
                        what: a.what,
                        written: a.written,
                        kept: a.kept,
                    });
                }
            }
            Err(e) => {
                refused.write(DrivelineEditRefused {
                    driveline: Some(root),
                    part: group[0].2,
                    message: format!("{e}; the state is kept"),
                });
            }
        }
    }
}
