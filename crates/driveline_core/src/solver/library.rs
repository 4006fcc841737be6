//! The mode library: the compiled modes of one network, shared by every simulation of it.
//!
//! A compiled mode (the null space of a lock pattern's rows, the reduced inertia and its
//! factors, the constraint-torque maps) is a pure function of the network's structure and
//! parameters, the lock pattern and, for a redundant mode, the locked elements' limits at
//! compile time. So simulations of equal networks (a fleet spawned from one file) hold one copy
//! of each: a simulation's mode cache ([`ModeSlot`]) keeps a handle on the library's entry and
//! its own Jacobian and Newton factors. Results do not change by a bit: a mode is compiled
//! into a cleared entry, from the same inputs, by the same code, whichever simulation asks
//! first.
//!
//! Equal networks are found by their description: the network's `Debug` form with the run-time
//! input values left out (they are state, not structure), compared whole. An entry no
//! simulation holds is recycled (the least recently handed out first); the library allocates a
//! new entry only when every one is held, so a simulation alone, which holds at most its
//! slot count, never allocates after it is built.

use super::*;
use std::sync::{Mutex, MutexGuard, Weak};

/// The sizes a compiled mode's buffers are cut to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ModeShape {
    /// Coordinates.
    pub(super) n: usize,
    /// The most active rows a mode can have (permanent, friction and kinematic rows).
    pub(super) rmax: usize,
    /// Rows with a prescribed right-hand side (with every kinematic clutch engaged).
    pub(super) nrhs: usize,
    /// Friction elements.
    pub(super) nf: usize,
}

impl ModeShape {
    pub(super) fn of(net: &Network) -> Self {
        let (nf, nk) = (net.friction.len(), net.kinematic.len());
        ModeShape { n: net.n_dof, rmax: net.rows.len() + nf + nk, nrhs: net.row_rhs.iter().flatten().count() + nk, nf }
    }
}

/// The compiled modes of one network (see the module docs).
pub(super) struct ModeLibrary {
    /// The network (its run-time input values left out) and what the solver derives from it.
    derived: Derived,
    shape: ModeShape,
    /// The mode of no slot: what a slot that holds no mode points to.
    empty: Arc<CompiledMode>,
    pool: Mutex<Pool>,
}

struct Pool {
    /// The entries (compiled or blank) and the clock at each one's last hand-out.
    entries: Vec<(Arc<CompiledMode>, u64)>,
    clock: u64,
    /// The free-coordinate bound new entries are sized by (the base mode's, once known).
    mmax: usize,
    /// The matrices of a compilation (one at a time, under the lock).
    work: CompileWork,
}

impl std::fmt::Debug for ModeLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pool = self.lock();
        let compiled = pool.entries.iter().filter(|(e, _)| e.compiled).count();
        write!(f, "ModeLibrary {{ entries: {}, compiled: {compiled} }}", pool.entries.len())
    }
}

/// The libraries of the networks simulated now, by description.
static REGISTRY: Mutex<Vec<(String, Weak<ModeLibrary>)>> = Mutex::new(Vec::new());

impl ModeLibrary {
    /// The library of `net`: the one simulations of an equal network share, or a new one.
    pub(super) fn for_network(net: &Network) -> Arc<ModeLibrary> {
        let mut plain = net.clone();
        for s in &mut plain.signals {
            *s = s.without_input_values();
        }
        let description = format!("{plain:?}");
        // (The registry's lock is held from the look-up to the insertion: two threads building
        // equal networks find one library.)
        let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        registry.retain(|(_, lib)| lib.strong_count() > 0);
        if let Some(lib) = registry.iter().find(|(d, _)| *d == description).and_then(|(_, lib)| lib.upgrade()) {
            return lib;
        }
        let lib = Arc::new(ModeLibrary::unshared(plain));
        registry.push((description, Arc::downgrade(&lib)));
        lib
    }

    /// A library of `net` that no registry lists (shared by no other simulation).
    pub(super) fn unshared(net: Network) -> ModeLibrary {
        let shape = ModeShape::of(&net);
        ModeLibrary {
            derived: Derived::new(net),
            shape,
            empty: Arc::new(CompiledMode::blank(&ModeShape { n: 0, rmax: 0, nrhs: 0, nf: 0 }, 0)),
            pool: Mutex::new(Pool {
                entries: Vec::new(),
                clock: 0,
                mmax: shape.n,
                work: CompileWork::new(shape.n, shape.rmax),
            }),
        }
    }

    /// The network, to edit in a test: the library must be this simulation's alone
    /// ([`ModeLibrary::unshared`]).
    #[cfg(test)]
    pub(super) fn network_mut(self: &mut Arc<Self>) -> &mut Network {
        &mut Arc::get_mut(self).expect("an unshared library").derived.net
    }

    /// The network and what the solver derives from it.
    #[inline]
    pub(super) fn derived(&self) -> &Derived {
        &self.derived
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        // (A compile that panicked left at most one entry half written, and uncompiled.)
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The mode of no slot.
    pub(super) fn empty(&self) -> Arc<CompiledMode> {
        self.empty.clone()
    }

    /// Sizes new entries for modes of at most `mmax` free coordinates, and makes the library
    /// hold at least `count` entries (blank ones added as needed).
    pub(super) fn reserve(&self, count: usize, mmax: usize) {
        let mut pool = self.lock();
        pool.mmax = mmax;
        while pool.entries.len() < count {
            pool.entries.push((Arc::new(CompiledMode::blank(&self.shape, mmax)), 0));
        }
    }

    /// The compiled mode of lock pattern `key` with the locked elements' limits `caps`: the
    /// library's copy, or one `compile` writes into a free entry (cleared first), with the
    /// library's compilation matrices.
    pub(super) fn acquire(
        &self,
        key: u64,
        caps: &[f64],
        compile: impl FnOnce(&mut CompiledMode, &mut CompileWork),
    ) -> Arc<CompiledMode> {
        let mut pool = self.lock();
        pool.clock += 1;
        let clock = pool.clock;
        if let Some((entry, used)) = pool.entries.iter_mut().find(|(e, _)| e.serves(key, caps)) {
            *used = clock;
            return entry.clone();
        }
        // A free entry: held by no simulation (only the library counts it), blank first, else
        // the least recently handed out.
        let free = pool
            .entries
            .iter()
            .enumerate()
            .filter(|(_, (e, _))| Arc::strong_count(e) == 1)
            .min_by_key(|(_, (e, used))| (e.compiled, *used))
            .map(|(i, _)| i);
        let i = match free {
            Some(i) => i,
            None => {
                let blank = CompiledMode::blank(&self.shape, pool.mmax);
                pool.entries.push((Arc::new(blank), 0));
                pool.entries.len() - 1
            }
        };
        let Pool { entries, work, .. } = &mut *pool;
        let (entry, used) = &mut entries[i];
        *used = clock;
        // (Unique: held by the library alone, and only cloned under this lock.)
        let mode = Arc::get_mut(entry).expect("a free entry is held by the library alone");
        if mode.compiled {
            mode.clear();
        }
        compile(mode, work);
        entry.clone()
    }
}
