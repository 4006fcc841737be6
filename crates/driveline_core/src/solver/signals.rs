//! The signal cache: signal values at the stages and the end of a sub-step, evaluated once per change.

use super::*;

/// Sub-steps a sine's phase is carried from one sub-step's end to the next before it is
/// evaluated afresh (rounding drifts by about an ulp per rotation: after 256, ~1e-14).
pub(super) const SINE_REANCHOR: u32 = 256;

/// Where a sine signal stands between sub-steps (see `Simulation::fill_stage_signals`).
#[derive(Debug, Clone, Copy)]
pub(super) struct SineState {
    /// Sub-step length the rotations are for, s.
    pub(super) h: f64,
    /// `[cos, sin]` of `omega c h` for the two stages and the end (`c = 1`).
    pub(super) rot: [[f64; 2]; 3],
    /// The time the last sub-step ended at, s (NaN: none to continue from).
    pub(super) next: f64,
    /// Sine and cosine of the phase at `next`.
    pub(super) sin: f64,
    pub(super) cos: f64,
    /// Sub-steps since the phase was last evaluated afresh.
    pub(super) age: u32,
    /// The signal's amplitude, offset and start time, copied from its definition when the
    /// unsteady signals are listed (the stage fill reads this record only).
    pub(super) amplitude: f64,
    pub(super) offset: f64,
    pub(super) start_time: f64,
}

impl Default for SineState {
    fn default() -> Self {
        Self {
            h: f64::NAN,
            rot: [[1.0, 0.0]; 3],
            next: f64::NAN,
            sin: 0.0,
            cos: 1.0,
            age: 0,
            amplitude: 0.0,
            offset: 0.0,
            start_time: 0.0,
        }
    }
}

/// Signals and laws are evaluated against these.
pub(super) fn eval_signals(signals: &[Signal], t: f64, left: bool, out: &mut [f64]) {
    for (k, s) in signals.iter().enumerate() {
        out[k] = if left { s.eval_left(t) } else { s.eval(t) };
    }
}
impl Simulation {
    /// Fills signal buffer `b` (`sig[0]`, `sig[1]`, `sig[2]`, or `sig_end` for 3) with the
    /// signals at `t` (`left`: the limit from the left). The steady signals of a buffer filled
    /// since the last change are kept (an empty buffer copies them from a filled one); only
    /// the unsteady ones (ramping inputs, sines, tables...) are evaluated again.
    pub(super) fn fill_signals(&mut self, b: usize, t: f64, left: bool) {
        self.fill_signals_but(b, t, left, false);
    }

    /// [`Simulation::fill_signals`], leaving out, when `rest_only`, the signals
    /// [`Simulation::fill_stage_signals`] writes itself (sines, steps and pulses).
    pub(super) fn fill_signals_but(&mut self, b: usize, t: f64, left: bool, rest_only: bool) {
        // Every path below but the `rest_only` pass over a filled buffer writes the held
        // signals' entries.
        if !rest_only || self.signals.filled[b] != self.signals.buffer_generation {
            self.signals.held_in.remove(b);
        }
        if self.signals.filled[b] != self.signals.buffer_generation {
            if let Some(src) = (0..4).find(|&k| self.signals.filled[k] == self.signals.buffer_generation) {
                let mut bufs = self.ws.signal_buffers();
                let (from, to) = if src < b {
                    let (lo, hi) = bufs.split_at_mut(b);
                    (&*lo[src], &mut *hi[0])
                } else {
                    let (lo, hi) = bufs.split_at_mut(src);
                    (&*hi[0], &mut *lo[b])
                };
                to.copy_from_slice(from);
            } else {
                let out = self.ws.signal_buffer(b);
                eval_signals(&self.model.signals, t, left, out);
                self.signals.filled[b] = self.signals.buffer_generation;
                return;
            }
            self.signals.filled[b] = self.signals.buffer_generation;
        }
        // The steady signals are those of the buffer; the others are evaluated at `t`.
        let out = self.ws.signal_buffer(b);
        let list = if rest_only { &self.signals.unsteady_other } else { &self.signals.unsteady };
        for &k in list.iter() {
            let s = &self.model.signals[k as usize];
            out[k as usize] = if left { s.eval_left(t) } else { s.eval(t) };
        }
    }

    /// The signals of a sub-step of length `h` from `t0`: its two stages (`sig[0]`, `sig[1]`)
    /// and the left limit at its end (`sig_end`). A sine's phase at the stages and the end is
    /// its phase at `t0` turned by `omega c h` (rotations kept while `h` is); its phase at `t0`
    /// is where the last sub-step's end left it when this sub-step continues it, and is
    /// evaluated afresh at least every [`SINE_REANCHOR`] sub-steps (rounding drifts by about an
    /// ulp per rotation). The values agree with evaluating each time to rounding; a sub-step
    /// lies on one side of the sine's start time (a time event).
    #[inline(always)]
    pub(super) fn fill_stage_signals(&mut self, t0: f64, h: f64) {
        let rest_only = !self.signals.sines.is_empty() || !self.signals.held.is_empty();
        // A step or a pulse changes only at its edges, time events that end sub-steps: inside
        // a sub-step and at its end's left limit it holds the value it took after the last
        // time event, evaluated once then (at a stage time, strictly after that event).
        if self.signals.held_events != self.signals.time_events {
            for &k in self.signals.held.iter() {
                let k = k as usize;
                let (seen, v) = &mut self.signals.held_value[k];
                if *seen != self.signals.time_events {
                    *seen = self.signals.time_events;
                    *v = self.model.signals[k].eval(t0 + C[0] * h);
                }
            }
            self.signals.held_events = self.signals.time_events;
            self.signals.held_in = BufferSet::NONE;
        }
        // Buffers filled since the last change need only their unsteady signals, and with
        // rest_only the loop below writes those of the common kinds itself.
        let rest = if rest_only { &self.signals.unsteady_other } else { &self.signals.unsteady };
        let nothing_left =
            rest.is_empty() && [0, 1, 3].iter().all(|&b| self.signals.filled[b] == self.signals.buffer_generation);
        if !nothing_left {
            for i in 0..2 {
                self.fill_signals_but(i, t0 + C[i] * h, false, rest_only);
            }
            self.fill_signals_but(3, t0 + h, true, rest_only);
        }
        // (The buffers are cut once: a store through one does not make the others reload.)
        let Work { sig, sig_end, .. } = &mut self.ws;
        let [s0, s1, _] = sig;
        let (s0, s1, se) = (&mut s0[..], &mut s1[..], &mut sig_end[..]);
        // (Buffers that already hold them, since the last time event, keep them.)
        if self.signals.held_in != BufferSet::STAGE_FILL {
            for &k in self.signals.held.iter() {
                let k = k as usize;
                let v = self.signals.held_value[k].1;
                (s0[k], s1[k], se[k]) = (v, v, v);
            }
            self.signals.held_in = BufferSet::STAGE_FILL;
        }
        for &k in self.signals.sines.iter() {
            let k = k as usize;
            let st = &mut self.signals.sine_state[k];
            let (amplitude, offset) = (st.amplitude, st.offset);
            if t0 < st.start_time {
                (s0[k], s1[k], se[k]) = (offset, offset, offset);
                st.next = f64::NAN;
                continue;
            }
            // Steps of `k dt - t` differ from `dt` by rounding: their rotations differ by less
            // than 1e-16 rad, and are reused (as the Newton factors are).
            // (A NaN `st.h`, never set, compares false and sets them.)
            let same_h = (h - st.h).abs() <= 1e-12 * h;
            let (sin0, cos0) = if same_h && st.next.to_bits() == t0.to_bits() && st.age < SINE_REANCHOR {
                st.age += 1;
                (st.sin, st.cos)
            } else {
                Self::sine_restart(&self.model.signals[k], st, t0, h, same_h)
            };
            let turn = |[cs, sn]: [f64; 2]| (sin0 * cs + cos0 * sn, cos0 * cs - sin0 * sn);
            let (a, b, e) = (turn(st.rot[0]), turn(st.rot[1]), turn(st.rot[2]));
            s0[k] = offset + amplitude * a.0;
            s1[k] = offset + amplitude * b.0;
            se[k] = offset + amplitude * e.0;
            (st.next, st.sin, st.cos) = (t0 + h, e.0, e.1);
        }
    }

    /// A sine's rotations for a new sub-step length `h` (unless `same_h`) and its phase at
    /// `t0` evaluated afresh: the rare branch of [`Simulation::fill_stage_signals`].
    #[cold]
    #[inline(never)]
    pub(super) fn sine_restart(signal: &Signal, st: &mut SineState, t0: f64, h: f64, same_h: bool) -> (f64, f64) {
        let Signal::Sine { f, phase, start_time, .. } = *signal else { return (st.sin, st.cos) };
        if !same_h {
            let omega = crate::signal::angular(f);
            st.h = h;
            for (r, c) in st.rot.iter_mut().zip([C[0], C[1], 1.0]) {
                let (sn, cs) = (omega * c * h).sin_cos();
                *r = [cs, sn];
            }
            // (A sub-step of a new length continues the phase: only the rotations change.)
            if st.next.to_bits() == t0.to_bits() && st.age < SINE_REANCHOR {
                st.age += 1;
                return (st.sin, st.cos);
            }
        }
        st.age = 0;
        crate::signal::sine_phase(f, phase, start_time, t0).sin_cos()
    }

    /// Records a change of signal values: filled buffers are stale. `recount` when a signal's
    /// definition may have changed (its steadiness with it).
    pub(super) fn signals_changed(&mut self, recount: bool) {
        self.signals.generation += 1;
        self.capacities.stale = None;
        self.signals.buffer_generation += 1;
        if recount {
            self.count_unsteady();
        }
    }

    /// Lists the signals that are not steady.
    pub(super) fn count_unsteady(&mut self) {
        self.signals.unsteady.clear();
        self.signals.unsteady_other.clear();
        self.signals.sines.clear();
        self.signals.held.clear();
        self.signals.held_events = u64::MAX;
        self.signals.held_in = BufferSet::NONE;
        self.friction.force_watch = 0;
        self.friction.watch_list.clear();
        self.signals.may_turn = false;
        for (k, s) in self.model.signals.iter().enumerate() {
            if !s.is_steady() {
                self.signals.unsteady.push(k as u32);
                if let Signal::Sine { amplitude, offset, start_time, .. } = *s {
                    self.signals.sines.push(k as u32);
                    if self.signals.sine_state.len() <= k {
                        // (Sized to the last sine: a network without sines holds none. It grows
                        // only when an edit makes a signal a sine, never while stepping.)
                        self.signals.sine_state.resize(k + 1, SineState::default());
                    }
                    let st = &mut self.signals.sine_state[k];
                    (st.amplitude, st.offset, st.start_time) = (amplitude, offset, start_time);
                } else if matches!(s, Signal::Step { .. } | Signal::Pulse { .. }) {
                    self.signals.held.push(k as u32);
                } else {
                    self.signals.unsteady_other.push(k as u32);
                }
                self.friction.force_watch |= self.model.readers.get(k).copied().unwrap_or(0);
                self.signals.may_turn |= !s.is_linear_between_events();
            }
        }
        // A step or a pulse holds its value between its time events, which end sub-steps, and
        // the modes are selected after each from that value: an element it drives is free
        // exactly while it is not positive, so its engage or release test cannot fire inside
        // a sub-step, and the kernel's list leaves it out.
        for i in bits(self.friction.force_watch) {
            if let Some(k) = self.model.net.friction[i].law.free_signal()
                && !self.signals.held.contains(&(k as u32))
            {
                self.friction.watch_list.push((i as u32, k as u32));
            }
        }
    }
}

/// The signal cache: which signals vary and how, and what the signal buffers hold. Kept so that a
/// step evaluates each signal once per change.
#[derive(Debug, Clone)]
pub(super) struct SignalCache {
    /// The indices of the signals that are not steady ([`Signal::is_steady`]; capacity: every
    /// signal, so a recount never allocates). With none, a filled signal buffer stays valid
    /// until the next change of a signal.
    pub(super) unsteady: CapVec<u32>,
    /// The unsteady signals a sub-step's stage fill evaluates one by one: all but the sines,
    /// which [`Simulation::fill_stage_signals`] rotates from one sine and cosine a sub-step,
    /// and the steps and pulses, which it evaluates once per time event.
    pub(super) unsteady_other: CapVec<u32>,
    /// The unsteady signals that are sines.
    pub(super) sines: CapVec<u32>,
    /// The unsteady signals that are steps or pulses: constant between their time events.
    pub(super) held: CapVec<u32>,
    /// Per signal (used by the steps and pulses): `(time_events, value)`, the value it held
    /// after the time event of that count.
    pub(super) held_value: Vec<(u64, f64)>,
    /// The time-event count at which every held value was last brought up to date
    /// (`u64::MAX`: never, or the list of held signals changed since).
    pub(super) held_events: u64,
    /// The stage buffers (bits 0, 1 and 3 of [`Work::signal_buffers`]) whose entries of the held
    /// signals are the values of `held_events`: written by a stage fill, cleared by any fill
    /// that writes those entries otherwise.
    pub(super) held_in: BufferSet,
    /// Time events passed so far.
    pub(super) time_events: u64,
    /// Per signal up to the last sine (used by the sines): where its sine stands, see
    /// [`SineState`].
    pub(super) sine_state: Vec<SineState>,
    /// Bumped at every change of a signal's definition or value (what depends on the signals,
    /// such as the cached capacities, is stale).
    pub(super) generation: u64,
    /// The generation of the signal buffers' steady values: bumped with `sig_gen`, except
    /// when an input set by its id is patched into the buffers in place.
    pub(super) buffer_generation: u64,
    /// The `buf_gen` at which each signal buffer (`sig[0]`, `sig[1]`, `sig[2]`, `sig_end`) was
    /// filled: its steady signals are valid while the generation holds (the unsteady ones are
    /// evaluated at every fill); `u64::MAX` when it must be evaluated again.
    pub(super) filled: [u64; 4],
    /// Some time-varying signal may rise and fall back inside a sub-step (a sine, see
    /// [`Signal::is_linear_between_events`]): the break-away screen always takes the stage
    /// samples then.
    pub(super) may_turn: bool,
    /// The stage signals of the sub-step about to be integrated are in place (the kernel
    /// filled them, then handed the sub-step to the general path).
    pub(super) stages_ready: bool,
}

impl SignalCache {
    /// An empty cache for `ns` signals (filled by [`Simulation::count_unsteady`]).
    pub(super) fn new(ns: usize) -> Self {
        SignalCache {
            unsteady: CapVec::new(ns),
            unsteady_other: CapVec::new(ns),
            sines: CapVec::new(ns),
            held: CapVec::new(ns),
            held_value: vec![(u64::MAX, 0.0); ns],
            held_events: u64::MAX,
            held_in: BufferSet::NONE,
            time_events: 0,
            sine_state: Vec::new(),
            generation: 0,
            buffer_generation: 0,
            filled: [u64::MAX; 4],
            may_turn: false,
            stages_ready: false,
        }
    }
}
