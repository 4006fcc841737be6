//! [`Outbox`]: a message writer that reaches the message queue only when it writes.
//!
//! Since Bevy 0.19 a resource is a component of an entity of its own, and fetching one for a
//! system parameter is a look-up of that entity and its component (some 70 instructions). A
//! `MessageWriter` fetches its queue every time its system runs; the driveline's systems hold
//! thirteen of them and write a message in few ticks, so a car's tick spent some 900
//! instructions on queues it did not touch (docs/performance.md). An `Outbox` declares the same
//! access as the `MessageWriter` it stands for (Bevy checks it against the system's other
//! parameters and other systems) and fetches the queue at its first write in a run.

// The parameter defers the fetch its access allows; the unsafe block says why it holds.
#![allow(unsafe_code)]

use bevy_ecs::change_detection::{DetectChangesMut, Tick};
use bevy_ecs::component::ComponentId;
use bevy_ecs::message::{Message, Messages};
use bevy_ecs::prelude::*;
use bevy_ecs::query::FilteredAccessSet;
use bevy_ecs::system::{SystemMeta, SystemParam, SystemParamValidationError};
use bevy_ecs::world::unsafe_world_cell::UnsafeWorldCell;

/// A system parameter that writes messages of type `M` as `MessageWriter<M>` does, fetching
/// the queue (the resource `Messages<M>`) at the first write of the system's run rather than
/// before the run: a system that writes in few of its runs pays for the queue only in those.
/// The driveline's systems write their messages through it. A missing queue (a message type
/// never added to the app) drops what is written, where a `MessageWriter` would skip its
/// system.
pub struct Outbox<'w, M: Message> {
    world: UnsafeWorldCell<'w>,
    queue: ComponentId,
    this_run: Tick,
    fetched: Option<Mut<'w, Messages<M>>>,
}

impl<M: Message> Outbox<'_, M> {
    /// Writes `message` (read by `MessageReader<M>`s as a `MessageWriter`'s would be).
    pub fn write(&mut self, message: M) {
        if self.fetched.is_none() {
            // SAFETY: `init_access` declared write access to this resource, as `ResMut` does,
            // so the system that holds this parameter may write it for its run (the world's
            // lifetime `'w`), and the parameter is the only handle to it in the system: the
            // `Mut` is made once and kept.
            // The component is `Messages<M>` (`init_state` registered it for that type).
            self.fetched =
                unsafe { self.world.get_resource_mut_by_id(self.queue).map(|queue| queue.with_type::<Messages<M>>()) };
        }
        if let Some(queue) = &mut self.fetched {
            queue.bypass_change_detection().write(message);
            // The tick a `ResMut` of this system would have set.
            queue.set_last_changed(self.this_run);
        }
    }
}

// SAFETY: the access is `ResMut<Messages<M>>`'s (`init_access` delegates to it, and Bevy
// checks it for conflicts); `get_param` reads nothing, and `write` reaches only that resource.
unsafe impl<M: Message> SystemParam for Outbox<'_, M> {
    type State = ComponentId;
    type Item<'w, 's> = Outbox<'w, M>;

    fn init_state(world: &mut World) -> Self::State {
        <ResMut<Messages<M>> as SystemParam>::init_state(world)
    }

    fn init_access(
        state: &Self::State,
        system_meta: &mut SystemMeta,
        component_access_set: &mut FilteredAccessSet,
        world: &mut World,
    ) {
        <ResMut<Messages<M>> as SystemParam>::init_access(state, system_meta, component_access_set, world);
    }

    #[inline]
    unsafe fn get_param<'w, 's>(
        state: &'s mut Self::State,
        _system_meta: &SystemMeta,
        world: UnsafeWorldCell<'w>,
        change_tick: Tick,
    ) -> Result<Self::Item<'w, 's>, SystemParamValidationError> {
        Ok(Outbox { world, queue: *state, this_run: change_tick, fetched: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy_ecs::message::MessageCursor;

    #[derive(Message, Debug, Clone, Copy, PartialEq)]
    struct Note(u32);

    /// Writes `Note(k)` on the runs where `k` (the run's count) is even.
    fn every_other(mut out: Outbox<Note>, mut k: Local<u32>) {
        if k.is_multiple_of(2) {
            out.write(Note(*k));
            out.write(Note(*k + 100));
        }
        *k += 1;
    }

    /// The same with a `MessageWriter`, to compare the queue's change ticks.
    fn every_other_writer(mut out: MessageWriter<Note>, mut k: Local<u32>) {
        if k.is_multiple_of(2) {
            out.write(Note(*k));
            out.write(Note(*k + 100));
        }
        *k += 1;
    }

    /// Runs `system` four times; returns what was written and, after each run, the queue's
    /// last-changed tick relative to the world's tick before the run, if the run moved it.
    fn run<M>(system: impl IntoSystem<(), (), M> + 'static) -> (Vec<Note>, Vec<Option<u32>>) {
        let mut world = World::new();
        world.init_resource::<Messages<Note>>();
        let id = world.register_system(system);
        // (So that the first run's tick is not the queue's insertion tick.)
        world.increment_change_tick();
        let mut cursor = MessageCursor::<Note>::default();
        let (mut read, mut changed) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            let (before, last) = (world.change_tick(), world.resource_ref::<Messages<Note>>().last_changed());
            world.run_system(id).expect("runs");
            let tick = world.resource_ref::<Messages<Note>>().last_changed();
            changed.push((tick != last).then(|| tick.get().wrapping_sub(before.get())));
            read.extend(cursor.read(world.resource::<Messages<Note>>()).copied());
        }
        (read, changed)
    }

    #[test]
    fn an_outbox_writes_what_a_message_writer_writes_and_touches_the_queue_only_then() {
        let (notes, changed) = run(every_other);
        assert_eq!(notes, [Note(0), Note(100), Note(2), Note(102)]);
        // The queue is marked changed in the runs that wrote, at the tick a `ResMut` sets.
        assert_eq!(run(every_other_writer), (notes, changed.clone()));
        assert!(changed[0].is_some() && changed[1].is_none() && changed[2].is_some(), "{changed:?}");
    }

    #[test]
    fn an_outbox_without_a_queue_drops_its_messages() {
        let mut world = World::new();
        let id = world.register_system(every_other);
        world.run_system(id).expect("runs without the queue");
        assert!(!world.contains_resource::<Messages<Note>>());
    }
}
