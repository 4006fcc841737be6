//! The fleet's part writes straight into the component columns: [`FleetParts`].
//!
//! A fleet writes some 50 part entities a vehicle each tick, driveline by driveline while the
//! vehicle's simulation is in the cache. Through a `Query`, each part costs a look-up of its
//! entity, its archetype and table, and the columns of each component it fetches (a search
//! in the table's column set per component, per part): about 120 instructions a part, a sixth
//! of a fleet's tick (docs/performance.md). Here the columns of every table that holds part
//! states are found once a tick ([`FleetParts::prepare`]), and a part's write is its entity's
//! location, the row in those columns, a compare and, if the value moved, the write and its
//! change tick, as `Mut` would set them.
//!
//! The system parameter declares the access of the two queries it stands for (write access to
//! [`BodyState`], [`CouplingState`] and [`ClutchEngagement`]; Bevy checks it against the
//! system's other parameters and other systems), so no one else reads or writes these columns
//! while it is in use, and no table moves or grows while a system runs.

// The one module of the plugin that reaches the ECS storage itself; each unsafe block says why
// it holds.
#![allow(unsafe_code)]

use crate::solve::{coupling_of, same_body};
use crate::{BodyState, ClutchEngagement, CouplingState, DrivelineCache, SkipWriteBack};
use bevy_ecs::change_detection::{MaybeLocation, Tick};
use bevy_ecs::component::ComponentId;
use bevy_ecs::prelude::*;
use bevy_ecs::query::FilteredAccessSet;
use bevy_ecs::system::{SystemMeta, SystemParam, SystemParamValidationError};
use bevy_ecs::world::unsafe_world_cell::UnsafeWorldCell;
use std::cell::UnsafeCell;
use std::panic::Location;

/// The queries whose access [`FleetParts`] declares (it reads and writes their columns).
type BodyQuery = Query<'static, 'static, &'static mut BodyState, Without<SkipWriteBack>>;
/// See [`BodyQuery`].
type CouplingQuery = Query<
    'static,
    'static,
    (&'static mut CouplingState, Option<&'static mut ClutchEngagement>),
    Without<SkipWriteBack>,
>;

/// One component's column in one table, for this tick: its values, their change ticks and
/// (with Bevy's `track_location`) the places that changed them. Null where the table has no
/// such column, or holds parts marked [`SkipWriteBack`].
#[derive(Clone, Copy)]
struct Column<T> {
    data: *const UnsafeCell<T>,
    changed: *const UnsafeCell<Tick>,
    by: MaybeLocation<*const UnsafeCell<&'static Location<'static>>>,
}

impl<T> Column<T> {
    /// No column.
    fn none() -> Self {
        Self { data: std::ptr::null(), changed: std::ptr::null(), by: MaybeLocation::new_with(std::ptr::null) }
    }

    /// The column of component `id` in `table`, if it has one.
    ///
    /// # Safety
    /// `T` is the type of component `id`.
    unsafe fn of(table: &bevy_ecs::storage::Table, id: ComponentId) -> Self {
        // (The column found once, its three slices read from it.)
        let Some(column) = table.get_column(id) else { return Self::none() };
        let len = table.entity_count() as usize;
        // SAFETY: `T` is component `id`'s type (the caller's promise) and `len` the table's
        // row count, the column's length.
        let (data, changed, by) = unsafe {
            (column.get_data_slice::<T>(len), column.get_changed_ticks_slice(len), column.get_changed_by_slice(len))
        };
        Self { data: data.as_ptr(), changed: changed.as_ptr(), by: by.map(<[_]>::as_ptr) }
    }

    /// Writes `value` in `row` if `differs` says it differs from what is there, with its change
    /// tick and place, as `Mut` does.
    ///
    /// # Safety
    /// `self` is not [`Column::none`], `row` is a row of its table, nothing else reads or writes
    /// this row meanwhile, and the table has not changed since `self` was taken from it.
    #[inline(always)]
    #[track_caller]
    unsafe fn set_if(&self, row: usize, tick: Tick, value: T, differs: impl FnOnce(&T, &T) -> bool) {
        // SAFETY: the caller's promises: the row is in the column and is ours alone.
        unsafe {
            let cell = &*(*self.data.add(row)).get();
            if differs(cell, &value) {
                *(*self.data.add(row)).get() = value;
                *(*self.changed.add(row)).get() = tick;
                self.by.map(|by| *(*by.add(row)).get() = Location::caller());
            }
        }
    }
}

impl<T> Column<T> {
    /// Hints the row's value and change tick toward the cache (nothing where there is no
    /// column). Reads and writes nothing: the addresses are only computed.
    #[inline(always)]
    fn hint(&self, row: usize) {
        if !self.data.is_null() {
            driveline_core::prefetch::hint(self.data.wrapping_add(row) as usize);
            driveline_core::prefetch::hint(self.changed.wrapping_add(row) as usize);
        }
    }
}

/// The three state columns of one table, and its entities (row by row).
#[derive(Clone, Copy)]
struct TableColumns {
    body: Column<BodyState>,
    coupling: Column<CouplingState>,
    engagement: Column<ClutchEngagement>,
    entities: *const Entity,
    rows: usize,
    /// Whether the table's parts are marked [`SkipWriteBack`] (then the columns are none).
    skip: bool,
    /// The table's capacity when its columns were found ([`UNFOUND`]: not yet): its columns
    /// and entities stay where they are until it grows ([`FleetParts::prepare`]).
    capacity: usize,
    /// Whether this tick's `prepare` found the columns (they are kept from now on).
    found_now: bool,
}

/// [`TableColumns::capacity`] of columns not found yet (no table has it).
const UNFOUND: usize = usize::MAX;

impl TableColumns {
    /// A table with no part states to write, whose rows hold `entities`.
    fn none(entities: &[Entity]) -> Self {
        Self {
            body: Column::none(),
            coupling: Column::none(),
            engagement: Column::none(),
            entities: entities.as_ptr(),
            rows: entities.len(),
            skip: false,
            capacity: UNFOUND,
            found_now: false,
        }
    }

    /// Whether `row` of this table holds `part`.
    fn holds(&self, row: usize, part: Entity) -> bool {
        // SAFETY: `row` is within the table's rows, which do not change while a system runs
        // (no entity is spawned, moved or despawned then); the entities are only read.
        row < self.rows && unsafe { *self.entities.add(row) } == part
    }
}

/// Where a part was last found: its table and row, packed in one word (`u64::MAX`: not yet
/// found). A fleet's vehicle keeps one per part ([`DrivelineCache`]), so that the next tick's
/// hints and writes reach the part's row without looking up its entity, which is another cache
/// miss per part: the place is checked against the table's entity at that row before use.
pub(crate) type PartPlace = std::sync::atomic::AtomicU64;

/// A part's table and row, unpacked from a [`PartPlace`].
fn unpack(place: &PartPlace) -> (usize, usize) {
    let v = place.load(std::sync::atomic::Ordering::Relaxed);
    ((v >> 32) as usize, (v & 0xffff_ffff) as usize)
}

/// Part `part`'s table columns and row if it is where `place` says (the table's row there holds
/// it).
#[inline(always)]
fn at_place<'t>(tables: &'t [TableColumns], part: Entity, place: &PartPlace) -> Option<(&'t TableColumns, usize)> {
    let (table, row) = unpack(place);
    let columns = tables.get(table)?;
    columns.holds(row, part).then_some((columns, row))
}

/// The parameter's state: the queries it stands for, the components' ids, and the tables'
/// columns of this tick (kept from tick to tick: the buffer keeps its room).
pub(crate) struct FleetPartsState {
    bodies: <BodyQuery as SystemParam>::State,
    couplings: <CouplingQuery as SystemParam>::State,
    ids: [ComponentId; 4],
    /// The tables with a column of [`BodyState`], and of [`CouplingState`]: those `prepare`
    /// fills (a part's table has one or the other).
    with_state: [TablesWith; 2],
    tables: Vec<TableColumns>,
}

// SAFETY: the raw pointers in `tables` are only read or written while the system holding the
// parameter runs (they are refilled by `prepare` each time before use), under its declared
// access; outside a run they are never read.
unsafe impl Send for FleetPartsState {}
// SAFETY: see `Send`; shared use across the compute threads writes disjoint rows (the claims).
unsafe impl Sync for FleetPartsState {}

/// What a fleet's part writes reach: every part's [`BodyState`], [`CouplingState`] and
/// [`ClutchEngagement`] (not those marked [`SkipWriteBack`]), written straight into their
/// columns (see the module docs). Call [`FleetParts::prepare`] before the writes of a tick.
pub(crate) struct FleetParts<'w, 's> {
    world: UnsafeWorldCell<'w>,
    state: &'s mut FleetPartsState,
    this_run: Tick,
}

// SAFETY: the access declared is the two queries' (write access to the three state components,
// with their filters), which is all `FleetParts` reads or writes; `get_param` hands out the
// world only to reach those columns.
unsafe impl SystemParam for FleetParts<'_, '_> {
    type State = FleetPartsState;
    type Item<'w, 's> = FleetParts<'w, 's>;

    fn init_state(world: &mut World) -> Self::State {
        let ids = [
            world.register_component::<BodyState>(),
            world.register_component::<CouplingState>(),
            world.register_component::<ClutchEngagement>(),
            world.register_component::<SkipWriteBack>(),
        ];
        FleetPartsState {
            bodies: <BodyQuery as SystemParam>::init_state(world),
            couplings: <CouplingQuery as SystemParam>::init_state(world),
            ids,
            with_state: [TablesWith::new(ids[0]), TablesWith::new(ids[1])],
            tables: Vec::new(),
        }
    }

    fn init_access(
        state: &Self::State,
        system_meta: &mut SystemMeta,
        component_access_set: &mut FilteredAccessSet,
        world: &mut World,
    ) {
        <BodyQuery as SystemParam>::init_access(&state.bodies, system_meta, component_access_set, world);
        <CouplingQuery as SystemParam>::init_access(&state.couplings, system_meta, component_access_set, world);
    }

    unsafe fn get_param<'w, 's>(
        state: &'s mut Self::State,
        _system_meta: &SystemMeta,
        world: UnsafeWorldCell<'w>,
        change_tick: Tick,
    ) -> Result<Self::Item<'w, 's>, SystemParamValidationError> {
        Ok(FleetParts { world, state, this_run: change_tick })
    }
}

impl FleetParts<'_, '_> {
    /// Finds the state columns of every table that holds part states for this tick's writes
    /// (tables with parts marked [`SkipWriteBack`] get none; the other tables have no rows
    /// here). Once a tick, on the calling thread. A table's columns move only when it grows
    /// (Bevy reallocates them with its entities' list, whose capacity is the table's): the
    /// columns of a table whose capacity is what it was when they were found are kept, and
    /// only its row count is read again (a look-up of each column searches the table's column
    /// set, some 40 instructions a table a tick).
    pub(crate) fn prepare(&mut self) {
        let [body, coupling, engagement, skip] = self.state.ids;
        // SAFETY: the world is only read here, and the columns found are only used under this
        // parameter's declared access; the storages are not borrowed mutably while a system
        // runs.
        let world = unsafe { self.world.storages() };
        let state = &mut *self.state;
        // (A table without part states stays as it was added, with no rows here.)
        state.tables.resize(world.tables.len(), TableColumns::none(&[]));
        // The body tables first, each with its body column; then the coupling tables with their
        // coupling and engagement columns, added to the entry of a table the first pass filled
        // (a part with both states) rather than over it. Only the columns a list needs: each
        // look-up searches the table's column set.
        let mut found = false;
        for (list, with) in state.with_state.iter_mut().enumerate() {
            with.refresh(&world.tables);
            for &id in &with.list {
                let Some(table) = world.tables.get(id) else { continue };
                let columns = &mut state.tables[id.as_usize()];
                if columns.capacity == table.capacity() {
                    columns.rows = table.entity_count() as usize;
                    continue;
                }
                found = true;
                if list == 0 || !table.has_column(body) {
                    *columns = TableColumns::none(table.entities());
                    columns.skip = table.has_column(skip);
                }
                columns.found_now = true;
                if columns.skip {
                    continue;
                }
                // SAFETY: each id is the component of the type named.
                unsafe {
                    if list == 0 {
                        columns.body = Column::of(table, body);
                    } else {
                        columns.coupling = Column::of(table, coupling);
                        columns.engagement = Column::of(table, engagement);
                    }
                }
            }
        }
        // The columns found this tick are kept from now on (after both lists: a table in both
        // gets its body column in the first, its coupling columns in the second).
        if found {
            for (k, columns) in state.tables.iter_mut().enumerate().filter(|(_, c)| c.found_now) {
                columns.found_now = false;
                let table = world.tables.get(bevy_ecs::storage::TableId::from_usize(k));
                columns.capacity = table.map_or(UNFOUND, |t| t.capacity());
            }
        }
    }

    /// Hints what [`FleetParts::write`] will read and write for `cache`'s driveline toward the
    /// cache, so that it arrives while another vehicle steps; one stage of it
    /// ([`driveline_core::prefetch::STAGES`]): 0 the driveline's own bytes (nothing here: the
    /// caller hints the whole `DrivelineCache`), 1 its lists of parts and of their places, 2
    /// the parts' rows. Writes nothing.
    ///
    /// The rows are where the parts were last found ([`PartPlace`]): a part that moved since is
    /// found by its entity when it is written, and its hint went elsewhere.
    pub(crate) fn prefetch_stage(&self, cache: &DrivelineCache, stage: usize) {
        use driveline_core::prefetch::{hint, slice};
        match stage {
            1 => {
                slice(&cache.parts);
                slice(&cache.places);
            }
            2 => {
                for place in &cache.places {
                    let (table, row) = unpack(place);
                    let Some(columns) = self.state.tables.get(table) else { continue };
                    hint(columns.entities.wrapping_add(row) as usize);
                    columns.body.hint(row);
                    columns.coupling.hint(row);
                    columns.engagement.hint(row);
                }
            }
            _ => {}
        }
    }

    /// Part `part`'s table columns and row: at `place` if the table's row there still holds
    /// it, else as its entity's location says (and `place` learns it).
    #[inline(always)]
    fn locate(&self, part: Entity, place: Option<&PartPlace>) -> Option<(&TableColumns, usize)> {
        if let Some(place) = place
            && let Some(found) = at_place(&self.state.tables, part, place)
        {
            return Some(found);
        }
        self.relocate(part, place)
    }

    /// [`FleetParts::locate`] when the part is not at its kept place (it moved, or is written
    /// for the first time): its entity's location, which `place` learns. Out of the write's
    /// loop, which keeps its registers for the common case.
    #[cold]
    #[inline(never)]
    fn relocate(&self, part: Entity, place: Option<&PartPlace>) -> Option<(&TableColumns, usize)> {
        let at = self.world.entities().get_spawned(part).ok()?;
        let (table, row) = (at.table_id.as_usize(), at.table_row.index());
        let columns = self.state.tables.get(table)?;
        if let Some(place) = place {
            place.store(((table as u64) << 32) | row as u64, std::sync::atomic::Ordering::Relaxed);
        }
        Some((columns, row))
    }

    /// Writes the parts of driveline `root` from its simulation, in element order, where they
    /// differ from what the parts hold. Called for several drivelines at once from the compute
    /// threads: a part is written by the driveline the book's claims name and by no other.
    /// [`FleetParts::prepare`] ran this tick.
    pub(crate) fn write(&self, root: Entity, cache: &DrivelineCache, book: &crate::Book) {
        let Some(sim) = cache.sim.as_ref() else { return };
        let relaxed = std::sync::atomic::Ordering::Relaxed;
        let (parts, places) = (&cache.parts[..], &cache.places[..]);
        // Every part claimed by this driveline as the claims stand (they change only at a
        // build, never while a system writes parts): no check per part.
        let whole = cache.claimed_whole.load(relaxed) == book.claims_epoch;
        // Whether every part is marked `SkipWriteBack`: as found at the marks' last count (no
        // mark added or removed since, no build), else looked at part by part now. A car whose
        // parts are all marked has nothing to write: no pass over its elements.
        let marks = cache.marks.load(relaxed);
        let all_marked = if marks != u64::MAX && marks >> 1 == book.marks_epoch {
            marks & 1 == 1
        } else {
            let all_marked = !parts.is_empty()
                && parts.iter().enumerate().all(|(k, &part)| {
                    (whole || book.claimed_by(part, root))
                        && self.locate(part, places.get(k)).is_some_and(|(columns, _)| columns.skip)
                });
            cache.marks.store(book.marks_epoch << 1 | u64::from(all_marked), relaxed);
            all_marked
        };
        if all_marked {
            return;
        }
        if whole {
            self.write_outputs::<true>(root, sim, parts, places, book);
        } else if self.write_outputs::<false>(root, sim, parts, places, book) {
            cache.claimed_whole.store(book.claims_epoch, relaxed);
        }
    }

    /// The writes of [`FleetParts::write`], element by element; `WHOLE`: every part is claimed
    /// by this driveline (no check per part). Whether every part was claimed by it.
    #[inline(always)]
    fn write_outputs<const WHOLE: bool>(
        &self,
        root: Entity,
        sim: &driveline_core::Simulation,
        parts: &[Entity],
        places: &[PartPlace],
        book: &crate::Book,
    ) -> bool {
        let tick = self.this_run;
        let tables = &self.state.tables[..];
        let all = std::cell::Cell::new(true);
        // (Slices of one length: the check of one covers the other.)
        let n = parts.len().min(places.len());
        let (parts, places) = (&parts[..n], &places[..n]);
        // Element `k`'s part's columns and row, if this driveline writes it.
        let find = |k: usize| {
            let part = *parts.get(k)?;
            if !WHOLE && !book.claimed_by(part, root) {
                all.set(false);
                return None;
            }
            // (`locate`'s two steps with the tables hoisted; a `match`, not `or_else`, whose
            // closure took 437 more instructions a vehicle-step here.)
            match at_place(tables, part, &places[k]) {
                Some(found) => Some(found),
                None => self.relocate(part, Some(&places[k])),
            }
        };
        // SAFETY (every write below): the column belongs to the part's table as `prepare` found
        // it this tick (no table changes while the system runs) and `row` is the part's row in
        // it (its location, or a kept place whose row holds the part); the claims name this
        // driveline for this part and one driveline only for each entity index (a live entity
        // is the only one of its index), so no other call, on any thread, reaches this row.
        sim.for_each_output(
            |k, angle, speed| {
                if let Some((columns, row)) = find(k)
                    && !columns.body.data.is_null()
                {
                    let value = BodyState { angle, speed };
                    unsafe { columns.body.set_if(row, tick, value, |a, b| !same_body(a, b)) };
                }
            },
            |c| {
                // The part's row first, then what goes there (read from the simulation only
                // now: nothing held across the search).
                let Some((columns, row)) = find(c.element()) else { return };
                if !columns.coupling.data.is_null()
                    && let Some(r) = c.relative()
                {
                    // (`!=` as `set_if_neq` compares, on the other write-back paths; the derived
                    // comparison takes fewer instructions here than one of the bits field by field.)
                    unsafe { columns.coupling.set_if(row, tick, coupling_of(r), |a, b| a != b) };
                }
                if !columns.engagement.data.is_null()
                    && let Some(u) = c.engagement()
                {
                    unsafe {
                        columns.engagement.set_if(row, tick, ClutchEngagement(u), |a, b| a.0.to_bits() != b.0.to_bits())
                    };
                }
            },
        );
        all.get()
    }
}

/// Runs `step` on every item of `query`, the items spread in one contiguous run of the query's
/// order per compute thread (the first on the calling thread, the others on `split`'s crew of
/// worker threads), each run as long as `split` deals it (from
/// the threads' rates at the last ticks, see [`Split`]); within a run, if `hint`,
/// `ahead(item, stage)` sees each item of the next `STAGES` before `step` takes the current
/// one, the item `j` places ahead with stage `STAGES - j`
/// ([`driveline_core::prefetch::for_each_ahead`]). A fleet hints the vehicles
/// ahead toward the cache there, a stage at a time (their own bytes, then the buffers those
/// point to, then the buffers named from those), so that each stage reads only pointers the
/// stage before brought in and the state arrives while this vehicle steps
/// (docs/performance.md).
///
/// Each run walks the query's own iteration over its range (table by table, column by column,
/// as the processor's prefetchers like it), not a look-up of each item by its entity.
pub(crate) fn par_for_each_ahead<'w, 's, D, F>(
    query: &mut Query<'w, 's, D, F>,
    split: &mut Split,
    hint: bool,
    ahead: impl Fn(&D::Item<'_, 's>, usize) + Sync,
    step: impl Fn(D::Item<'_, 's>) + Sync,
) where
    D: bevy_ecs::query::IterQueryData + bevy_ecs::query::ArchetypeQueryData,
    F: bevy_ecs::query::ArchetypeFilter,
{
    // (The tables' lengths summed: no pass over the items.)
    let len = query.iter_mut().len();
    let query = &*query;
    let (ahead, step) = (&ahead, &step);
    let run = move |from: usize, to: usize| {
        // SAFETY: a query's iteration yields each of its entities once, in the same order each
        // time while the `&mut Query` this function holds for its whole length keeps the world
        // from changing; each run takes the items `from..to` of it and the runs' ranges are
        // disjoint, so no entity's item is fetched by two runs, and the items alive at once in
        // a run (the current and the next `STAGES`) are of distinct entities.
        let items = unsafe { query.iter_unsafe() }.skip(from).take(to - from);
        if hint {
            driveline_core::prefetch::for_each_ahead(items, ahead, step);
        } else {
            // (No window when nothing is hinted: each item goes straight to its step, not
            // through the window's slots.)
            items.for_each(step);
        }
    };
    match bevy_tasks::ComputeTaskPool::try_get().map(|pool| pool.thread_num()) {
        Some(threads) if threads >= 2 => {
            split.deal(len, threads);
            let started = bevy_platform::time::Instant::now();
            let (bounds, ends) = (&split.bounds, &split.ends);
            let pass = |j: usize| {
                let (from, to) = (bounds[j], bounds[j + 1]);
                if from < to {
                    run(from, to);
                    let took = started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
                    ends[j].store(took, std::sync::atomic::Ordering::Relaxed);
                }
            };
            // (Run 0 on the calling thread, with the runs no worker took if a thread failed to
            // start: `Crew::run_each`.)
            driveline_core::crew::Crew::fitted(&mut split.crew, threads - 1).run_each(ends.len(), &pass);
            split.balance();
        }
        // One compute thread or none: the calling thread, without a hand-off.
        _ => run(0, len),
    }
}

/// How [`par_for_each_ahead`] deals the items out: one contiguous run of the query's order per
/// compute thread, each run's length from how fast its thread went through its run at the last
/// ticks, counted from the pass's start to the run's end (a thread that wakes late, or whose
/// run holds the costlier vehicles, gets fewer), so that the threads finish together rather
/// than one waiting for the other at the end of every tick. Which thread steps an item changes
/// nothing but the time: each vehicle's step is its own.
#[derive(Default)]
pub(crate) struct Split {
    /// Each run's share of the items, summing to 1 (empty: not dealt yet).
    shares: Vec<f64>,
    /// This tick's runs: run `k` takes the items `bounds[k]..bounds[k + 1]`.
    bounds: Vec<usize>,
    /// How long after the pass's start each run of this tick ended, ns (0: no run).
    ends: Vec<std::sync::atomic::AtomicU64>,
    /// The threads that run the runs after the first (the calling thread runs the first): one
    /// wake-up a pass, and the calling thread watches for their ends rather than sleeping
    /// ([`driveline_core::crew`]; made at the first pass of a thread count).
    crew: Option<driveline_core::crew::Crew>,
}

impl Split {
    /// The weight of a tick's measured shares against those kept: a few ticks follow a lasting
    /// change, one slow tick (the thread preempted) moves the runs by a fraction.
    const FOLLOW: f64 = 0.25;
    /// The smallest share of a run, as a fraction of an equal share: a run that went slowly
    /// once keeps items enough to be measured again.
    const FLOOR: f64 = 0.25;

    /// Deals `len` items out to `runs` runs for this tick.
    fn deal(&mut self, len: usize, runs: usize) {
        if self.shares.len() != runs {
            self.shares = vec![1.0 / runs as f64; runs];
            self.ends = (0..runs).map(|_| Default::default()).collect();
        }
        self.bounds.clear();
        let mut sum = 0.0;
        self.bounds.push(0);
        for share in &self.shares[..runs - 1] {
            sum += share;
            let bound = ((len as f64 * sum).round() as usize).clamp(*self.bounds.last().unwrap_or(&0), len);
            self.bounds.push(bound);
        }
        self.bounds.push(len);
        for end in &self.ends {
            end.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Moves the shares toward each run's measured rate of items a second (runs that did not
    /// run, or took no measurable time, leave the shares as they are).
    fn balance(&mut self) {
        let runs = self.shares.len();
        let mut rates = [0.0f64; 64];
        let mut total = 0.0;
        for k in 0..runs.min(64) {
            let (n, ns) =
                (self.bounds[k + 1] - self.bounds[k], self.ends[k].load(std::sync::atomic::Ordering::Relaxed));
            if n == 0 || ns == 0 {
                return;
            }
            rates[k] = n as f64 / ns as f64;
            total += rates[k];
        }
        if runs > 64 || !(total.is_finite() && total > 0.0) {
            return;
        }
        let mut sum = 0.0;
        for (share, rate) in self.shares.iter_mut().zip(&rates) {
            *share = (1.0 - Self::FOLLOW) * *share + Self::FOLLOW * rate / total;
            sum += *share;
        }
        // Shares below the floor raised to it, the rest taken from the others in proportion.
        let floor = Self::FLOOR / runs as f64;
        let (mut deficit, mut above) = (0.0, 0.0);
        for share in &mut self.shares {
            *share /= sum;
            if *share < floor {
                deficit += floor - *share;
            } else {
                above += *share;
            }
        }
        for share in &mut self.shares {
            *share = if *share < floor { floor } else { *share - deficit * *share / above };
        }
    }
}

/// The tables that have a column of one component, kept from tick to tick: the world's tables
/// are only ever appended (Bevy never removes one), so each refresh looks only at those added
/// since the last. A scan of change ticks then visits the few tables that hold the component
/// (one to three for most part components) instead of asking each of the world's tables for a
/// column it mostly does not have (for one car, some thirty tables for each of a dozen
/// scans a tick: docs/performance.md).
pub(crate) struct TablesWith {
    /// The component.
    id: ComponentId,
    /// How many of the world's tables `list` has looked at.
    seen: usize,
    /// The tables (of the first `seen`) with a column of the component.
    list: Vec<bevy_ecs::storage::TableId>,
    /// For each table of `list`, its capacity and the address of its column's change ticks when
    /// last found (`usize::MAX`: not found yet). A table's columns move only when it grows, as
    /// [`FleetParts::prepare`] keeps them: a scan then reads the table's capacity and row count
    /// (one line) instead of searching its column set (a line of its sparse index and one of the
    /// column's, for each column a tick: docs/performance.md).
    kept: Vec<[std::sync::atomic::AtomicUsize; 2]>,
}

impl TablesWith {
    /// No table looked at yet.
    pub(crate) fn new(id: ComponentId) -> Self {
        Self { id, seen: 0, list: Vec::new(), kept: Vec::new() }
    }

    /// Looks at the tables added since the last refresh.
    pub(crate) fn refresh(&mut self, tables: &bevy_ecs::storage::Tables) {
        if tables.len() < self.seen {
            // (Not a world Bevy makes; start over rather than trust the list.)
            self.seen = 0;
            self.list.clear();
            self.kept.clear();
        }
        for (k, table) in tables.iter().enumerate().skip(self.seen) {
            if table.has_column(self.id) {
                self.list.push(bevy_ecs::storage::TableId::from_usize(k));
                self.kept.push([usize::MAX.into(), 0.into()]);
            }
        }
        self.seen = tables.len();
    }

    /// Whether the list has looked at every one of `tables`.
    pub(crate) fn is_current(&self, tables: &bevy_ecs::storage::Tables) -> bool {
        self.seen == tables.len()
    }

    /// Whether any row of the listed tables changed since `last_run`, as `Changed` would see it
    /// at `this_run` (`Tick::is_newer_than`): one branch-free pass over each column's change
    /// ticks, which the compiler vectorises, without fetching an entity. A tick's scans of a
    /// fleet's 60,000 parts for renames, re-joins and parameter edits (none, nearly always)
    /// went row by row through queries, on the calling thread (docs/performance.md). The list
    /// is current ([`TablesWith::refresh`]); a component stored in sparse sets is in no table,
    /// so the callers ask only for table components ([`AnyChanged`] checks).
    ///
    /// `world` is borrowed as a whole (read access to everything: an exclusive system's, or a
    /// system's `&World`).
    pub(crate) fn any_changed(&self, world: &World, last_run: Tick, this_run: Tick) -> bool {
        // SAFETY: a shared borrow of the whole world: nothing writes the change ticks meanwhile.
        unsafe { self.any_younger(&world.storages().tables, this_run, age(last_run, this_run)) }
    }

    /// Whether any row of the listed tables changed less than `since_system` ticks before
    /// `this_run` (see [`TablesWith::any_changed`]); `since_system` is at most `MAX_CHANGE_AGE`.
    ///
    /// # Safety
    /// The caller holds read access to the component (a system parameter declaring it, or the
    /// whole world), so no one writes its change ticks meanwhile.
    unsafe fn any_younger(&self, tables: &bevy_ecs::storage::Tables, this_run: Tick, since_system: u32) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let now = this_run.get();
        self.list.iter().zip(&self.kept).any(|(&table, [capacity, at])| {
            let Some(t) = tables.get(table) else { return false };
            let rows = t.entity_count() as usize;
            let ticks = if capacity.load(Relaxed) == t.capacity() {
                // SAFETY: the column's change ticks found at this capacity, which the table still
                // has: they have not moved, and they hold a tick for each of its `rows` rows.
                unsafe { std::slice::from_raw_parts(at.load(Relaxed) as *const UnsafeCell<Tick>, rows) }
            } else {
                let Some(ticks) = t.get_changed_ticks_slice_for(self.id) else { return false };
                capacity.store(t.capacity(), Relaxed);
                at.store(ticks.as_ptr() as usize, Relaxed);
                ticks
            };
            // SAFETY: the caller's promise.
            unsafe { any_younger(ticks, now, since_system) }
        })
    }
}

/// How many ticks before `this_run` `tick` is, as `Tick::is_newer_than` counts (at most
/// `MAX_CHANGE_AGE`).
fn age(tick: Tick, this_run: Tick) -> u32 {
    this_run.get().wrapping_sub(tick.get()).min(bevy_ecs::change_detection::MAX_CHANGE_AGE)
}

/// Whether any of `ticks` is less than `since_system` ticks before `now`, as
/// `Tick::is_newer_than` says when `since_system` is at most `MAX_CHANGE_AGE` (as [`age`] gives
/// it): that function caps both ages there, which changes no answer when the system's is
/// capped already (a tick's age past the cap is past `since_system` with or without it). A
/// fleet's every tick reads the change ticks of every part's name, joints and typed component,
/// on the calling thread (some 170 a vehicle): with AVX2 where the processor has it (eight
/// ticks a subtraction and a minimum), else the portable loop. The same answer either way:
/// integer arithmetic.
///
/// # Safety
/// Nothing writes `ticks` while this reads them.
#[inline(always)]
unsafe fn any_younger(ticks: &[UnsafeCell<Tick>], now: u32, since_system: u32) -> bool {
    // (Most part tables hold a few rows for one car: a call into the AVX2 loop, which cannot
    // be inlined here, and its set-up and tail cost more than the rows themselves.)
    if ticks.len() < SHORT_TICKS {
        // SAFETY: the caller's promise.
        return unsafe { any_younger_portable(ticks, now, since_system) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (just detected); the caller's promise for the rest.
        return unsafe { any_younger_avx2(ticks, now, since_system) };
    }
    // SAFETY: the caller's promise.
    unsafe { any_younger_portable(ticks, now, since_system) }
}

/// Below this many change ticks [`any_younger`] reads them inline, four at a time.
const SHORT_TICKS: usize = 16;

/// [`any_younger`] with AVX2: the youngest tick's age, then one compare (some tick's age is under
/// `since_system` exactly when the least of them is); no early exit, so that it vectorises to a
/// subtraction and an unsigned minimum per eight lanes.
///
/// # Safety
/// The processor has AVX2; nothing writes `ticks` meanwhile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn any_younger_avx2(ticks: &[UnsafeCell<Tick>], now: u32, since_system: u32) -> bool {
    let youngest = ticks.iter().fold(u32::MAX, |least, cell| {
        // SAFETY: the caller's promise: the ticks are only read.
        let tick = unsafe { *cell.get() }.get();
        least.min(now.wrapping_sub(tick))
    });
    youngest < since_system
}

/// [`any_younger`] without AVX2: each tick's age compared, the answers or-ed, no early exit,
/// four ticks at a time so that it vectorises with the baseline SSE2 (a subtraction and a
/// compare a four), the last four read again where the length is not a multiple of four (an
/// or of answers does not mind a tick read twice). Under four ticks, one by one.
///
/// # Safety
/// Nothing writes `ticks` meanwhile.
#[inline(always)]
unsafe fn any_younger_portable(ticks: &[UnsafeCell<Tick>], now: u32, since_system: u32) -> bool {
    // SAFETY: the caller's promise: the ticks are only read.
    let young = |cell: &UnsafeCell<Tick>| u32::from(now.wrapping_sub(unsafe { *cell.get() }.get()) < since_system);
    let four = |any: [u32; 4], q: &[UnsafeCell<Tick>; 4]| std::array::from_fn(|j| any[j] | young(&q[j]));
    let Some(last) = ticks.last_chunk::<4>() else {
        return ticks.iter().fold(0, |any, cell| any | young(cell)) != 0;
    };
    let (quads, _) = ticks.as_chunks::<4>();
    let any = quads.iter().fold([0; 4], four);
    four(any, last) != [0; 4]
}

/// Whether component `id` is stored in tables (what [`TablesWith::any_changed`] reads), not
/// in sparse sets.
pub(crate) fn stored_in_tables(world: &World, id: ComponentId) -> bool {
    world.components().get_info(id).is_some_and(|info| info.storage_type() == bevy_ecs::component::StorageType::Table)
}

/// A system parameter: whether any `T` changed since the system last ran
/// ([`TablesWith::any_changed`]), declaring read access to `T` as `Query<&T>` does. For a component
/// stored in sparse sets it always says yes (the caller then runs its query as before).
pub(crate) struct AnyChanged<'w, 's, T: Component> {
    world: UnsafeWorldCell<'w>,
    state: &'s AnyChangedState<T>,
    last_run: Tick,
    this_run: Tick,
}

/// [`AnyChanged`]'s state.
pub(crate) struct AnyChangedState<T: Component> {
    query: <Query<'static, 'static, &'static T> as SystemParam>::State,
    /// The tables with a column of `T`, refreshed as each run fetches the parameter.
    tables: TablesWith,
    in_tables: bool,
}

impl<T: Component> AnyChanged<'_, '_, T> {
    /// Whether any `T` changed since the system last ran (a table component: exactly as
    /// `Changed<T>` over every entity would say).
    pub(crate) fn any(&self) -> bool {
        self.any_after_all(&[])
    }

    /// Whether any `T` changed since the system last ran and after every one of the ticks
    /// `since` too (as `Changed<T>` with each of them for its last run would say, all at once;
    /// a table component exactly, else always yes).
    pub(crate) fn any_after_all(&self, since: &[Tick]) -> bool {
        let age = since.iter().map(|&t| age(t, self.this_run)).fold(age(self.last_run, self.this_run), u32::min);
        // SAFETY: the storages are only read, and `T`'s change ticks under the read access to
        // `T` this parameter declared.
        !self.state.in_tables
            || unsafe { self.state.tables.any_younger(&self.world.storages().tables, self.this_run, age) }
    }
}

// SAFETY: the access declared is `Query<&T>`'s (read of `T`), and `get_param` reads only `T`'s
// change ticks under it; the world cell is used for nothing else.
unsafe impl<T: Component> SystemParam for AnyChanged<'_, '_, T> {
    type State = AnyChangedState<T>;
    type Item<'w, 's> = AnyChanged<'w, 's, T>;

    fn init_state(world: &mut World) -> Self::State {
        let id = world.register_component::<T>();
        let in_tables = stored_in_tables(world, id);
        AnyChangedState { query: <Query<&T> as SystemParam>::init_state(world), tables: TablesWith::new(id), in_tables }
    }

    fn init_access(
        state: &Self::State,
        system_meta: &mut SystemMeta,
        component_access_set: &mut FilteredAccessSet,
        world: &mut World,
    ) {
        <Query<&T> as SystemParam>::init_access(&state.query, system_meta, component_access_set, world);
    }

    unsafe fn get_param<'w, 's>(
        state: &'s mut Self::State,
        system_meta: &SystemMeta,
        world: UnsafeWorldCell<'w>,
        change_tick: Tick,
    ) -> Result<Self::Item<'w, 's>, SystemParamValidationError> {
        // SAFETY: only the list of tables and which columns each has are read (no component
        // data); no table is added while a system runs.
        state.tables.refresh(&unsafe { world.storages() }.tables);
        Ok(AnyChanged { world, state, last_run: system_meta.get_last_run(), this_run: change_tick })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driveline_core::prefetch::STAGES;

    #[derive(Component)]
    struct Item(usize);

    /// What each of `n` items saw through `par_for_each_ahead` with `hint`: the stages, then
    /// `usize::MAX` for its step.
    fn seen(n: usize, hint: bool) -> Vec<Vec<usize>> {
        let mut world = World::new();
        for i in 0..n {
            world.spawn(Item(i));
        }
        let log: Vec<std::sync::Mutex<Vec<usize>>> = (0..n).map(|_| Default::default()).collect();
        let mut state = bevy_ecs::system::SystemState::<Query<&Item>>::new(&mut world);
        par_for_each_ahead(
            &mut state.get_mut(&mut world).unwrap(),
            &mut Split::default(),
            hint,
            |item: &&Item, stage| log[item.0].lock().unwrap().push(stage),
            |item: &Item| log[item.0].lock().unwrap().push(usize::MAX),
        );
        log.into_iter().map(|entry| entry.into_inner().unwrap()).collect()
    }

    /// `prepare` keeps a table's columns while the table keeps its capacity, and finds them
    /// again when it grows: after every growth the columns it holds are the table's own.
    #[test]
    fn prepared_columns_follow_their_table_as_it_grows() {
        let mut world = World::new();
        let mut state = bevy_ecs::system::SystemState::<FleetParts>::new(&mut world);
        let mut capacities = Vec::new();
        for n in 0..200 {
            world.spawn((BodyState { angle: 0.0, speed: n as f64 }, crate::Inertia { j: 1.0, ..Default::default() }));
            let mut parts = state.get_mut(&mut world).unwrap();
            parts.prepare();
            let kept = parts.state.tables.clone();
            let id = world.register_component::<BodyState>();
            let tables = &world.storages().tables;
            let (k, table) = tables.iter().enumerate().find(|(_, t)| t.has_column(id)).expect("a table of bodies");
            let column = table.get_column(id).unwrap();
            // SAFETY: the column is `BodyState`'s; the world is not changed while it is read.
            let data = unsafe { column.get_data_slice::<BodyState>(table.entity_count() as usize) };
            let cached = &kept[k];
            assert_eq!(cached.capacity, table.capacity(), "after {n} spawns");
            assert_eq!(cached.rows, n + 1);
            assert_eq!(cached.body.data, data.as_ptr(), "after {n} spawns");
            assert_eq!(cached.entities, table.entities().as_ptr(), "after {n} spawns");
            capacities.push(table.capacity());
        }
        capacities.dedup();
        assert!(capacities.len() > 3, "the table grew a few times: {capacities:?}");
    }

    /// A scan keeps a table's change-tick column while the table keeps its capacity, and finds it
    /// again when the table grows: after every growth it reads the table's own ticks (the newest
    /// row's change is seen, and nothing once it is older than the last run).
    #[test]
    fn kept_change_ticks_follow_their_table_as_it_grows() {
        use std::sync::atomic::Ordering::Relaxed;
        let mut world = World::new();
        let id = world.register_component::<BodyState>();
        let mut scan = TablesWith::new(id);
        let mut capacities = Vec::new();
        for n in 0..200 {
            let before = world.change_tick();
            world.increment_change_tick();
            world.spawn(BodyState { angle: 0.0, speed: n as f64 });
            let now = world.change_tick();
            scan.refresh(&world.storages().tables);
            assert!(scan.any_changed(&world, before, now), "the newest row after {n} spawns");
            assert!(!scan.any_changed(&world, now, now), "no row changed after the last run, {n} spawns");
            let tables = &world.storages().tables;
            let (k, table) = tables.iter().enumerate().find(|(_, t)| t.has_column(id)).expect("a table of bodies");
            let at = scan.list.iter().position(|t| t.as_usize() == k).expect("the table listed");
            let ticks = table.get_changed_ticks_slice_for(id).expect("the column");
            assert_eq!(scan.kept[at][0].load(Relaxed), table.capacity(), "after {n} spawns");
            assert_eq!(scan.kept[at][1].load(Relaxed), ticks.as_ptr() as usize, "after {n} spawns");
            capacities.push(table.capacity());
        }
        capacities.dedup();
        assert!(capacities.len() > 3, "the table grew a few times: {capacities:?}");
    }

    /// The change-tick scan says what `Tick::is_newer_than` says of some tick, on every path
    /// (AVX2 where the processor has it, the portable loop) and every length (the vector
    /// loops' tails), with the clock wrapped around `u32::MAX` and ages past `MAX_CHANGE_AGE`.
    #[test]
    fn the_change_tick_scan_agrees_with_is_newer_than() {
        use bevy_ecs::change_detection::MAX_CHANGE_AGE;
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for case in 0..3000 {
            let now = next() as u32;
            let since = match case % 3 {
                0 => (next() % 64) as u32,
                1 => next() as u32,
                _ => MAX_CHANGE_AGE,
            }
            .min(MAX_CHANGE_AGE);
            let last_run = Tick::new(now.wrapping_sub(since));
            let len = (next() % 80) as usize;
            // Mostly old ticks, and sometimes one young enough (or just too old).
            let ticks: Vec<UnsafeCell<Tick>> = (0..len)
                .map(|_| {
                    let back = match next() % 16 {
                        0 => since.wrapping_sub(1),
                        1 => since,
                        _ => since.saturating_add((next() % 1000) as u32),
                    };
                    UnsafeCell::new(Tick::new(now.wrapping_sub(back)))
                })
                .collect();
            let expected = ticks.iter().any(|t| unsafe { *t.get() }.is_newer_than(last_run, Tick::new(now)));
            // SAFETY: the ticks are this test's own and only read.
            unsafe {
                assert_eq!(any_younger(&ticks, now, since), expected, "case {case}");
                assert_eq!(any_younger_portable(&ticks, now, since), expected, "case {case}");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    assert_eq!(any_younger_avx2(&ticks, now, since), expected, "case {case}");
                }
            }
        }
    }

    /// The runs cover the items once, in order; a run that went slower gets fewer items at the
    /// next ticks, never fewer than its floor; a tick without a measure changes nothing.
    #[test]
    fn the_split_follows_the_runs_rates() {
        let mut split = Split::default();
        split.deal(10, 2);
        assert_eq!(split.bounds, [0, 5, 10]);
        let measured = |split: &mut Split, ns: [u64; 2]| {
            for (end, ns) in split.ends.iter().zip(ns) {
                end.store(ns, std::sync::atomic::Ordering::Relaxed);
            }
            split.balance();
        };
        // Run 1 took three times as long for as many items: its rate is a third of run 0's.
        measured(&mut split, [1000, 3000]);
        assert!((split.shares[0] - (0.75 * 0.5 + 0.25 * 0.75)).abs() < 1e-12, "{:?}", split.shares);
        split.deal(10, 2);
        assert_eq!(split.bounds, [0, 6, 10]);
        // No measure (a run that did not end, or did not run): the shares stay.
        let before = split.shares.clone();
        measured(&mut split, [0, 3000]);
        assert_eq!(split.shares, before);
        // A run that is always far slower keeps at least its floor, and the shares sum to 1.
        for _ in 0..200 {
            split.deal(1000, 2);
            let n = [split.bounds[1] - split.bounds[0], split.bounds[2] - split.bounds[1]];
            measured(&mut split, [n[0] as u64 * 10, n[1] as u64 * 10_000 + 1]);
        }
        let floor = Split::FLOOR / 2.0;
        assert!((split.shares[1] - floor).abs() < 1e-12, "{:?}", split.shares);
        assert!((split.shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        split.deal(1000, 2);
        assert!(split.bounds.windows(2).all(|w| w[0] <= w[1]) && split.bounds[2] == 1000);
        // Another number of threads starts again from equal shares.
        split.deal(9, 3);
        assert_eq!(split.bounds, [0, 3, 6, 9]);
    }

    /// Each item is stepped once, and before its step it saw every stage of the hints in order
    /// (all but the first item of each thread's run, which has no item before it to see it);
    /// without hints, each item is stepped once and sees none.
    #[test]
    fn each_item_sees_every_stage_in_order_before_its_step() {
        bevy_tasks::ComputeTaskPool::get_or_init(bevy_tasks::TaskPool::default);
        let all: Vec<usize> = (0..STAGES).chain([usize::MAX]).collect();
        let runs = bevy_tasks::ComputeTaskPool::get().thread_num().max(1);
        for n in [0, 1, 2, 3, 4, 5, 17, 100] {
            assert!(seen(n, false).iter().all(|s| s[..] == [usize::MAX]), "{n} items, no hints");
            let mut unhinted = 0;
            for s in seen(n, true) {
                if s[..] == [usize::MAX] {
                    unhinted += 1;
                } else {
                    assert_eq!(s[..], all[..], "{n} items");
                }
            }
            assert!(unhinted <= runs.min(n), "{n} items: {unhinted} unhinted");
        }
    }
}
