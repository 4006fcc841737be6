//! A vehicle's part of a snapshot ([`VehicleSnapshot`]): the controllers' dynamic state and
//! the description's fingerprint, around the solver's part.

use super::*;
use crate::snapshot::{self, Persist, StateReader, StateWriter, persist_fields};

impl VehicleControl {
    /// Tells the controllers that `sim`'s parameters were updated to `spec` (after
    /// [`Simulation::update_parameters`]): snapshots taken before no longer restore.
    pub fn parameters_updated(&mut self, spec: &crate::NetworkSpec) {
        self.fingerprint = crate::snapshot::fingerprint(&format!("{:016x}{spec:?}", self.fingerprint));
    }

    /// A snapshot of these controllers, `sim` and the telemetry record `tel` they last wrote
    /// (see [`Vehicle::snapshot`]).
    pub fn snapshot(&self, sim: &Simulation, tel: &Telemetry) -> VehicleSnapshot {
        let mut w = StateWriter::with_capacity(2048);
        self.save_state(&mut w, tel);
        sim.save_state(&mut w);
        VehicleSnapshot { format: snapshot::FORMAT, vehicle: self.fingerprint, time: sim.time(), state: w.words }
    }

    /// Where each field's words start in a snapshot of these controllers and `sim` (for tests
    /// that locate a difference between two states).
    #[doc(hidden)]
    pub fn state_layout(&self, sim: &Simulation, tel: &Telemetry) -> Vec<(usize, &'static str)> {
        let mut w = StateWriter::with_capacity(2048);
        w.labels = Some(Vec::new());
        self.save_state(&mut w, tel);
        sim.save_state(&mut w);
        w.labels.unwrap_or_default()
    }

    /// Restores a snapshot into these controllers, `sim` and the telemetry record `tel` (see
    /// [`Vehicle::restore`]).
    pub fn restore(
        &mut self,
        sim: &mut Simulation,
        tel: &mut Telemetry,
        snap: &VehicleSnapshot,
    ) -> Result<(), SnapshotError> {
        if snap.format != snapshot::FORMAT {
            return Err(SnapshotError::Format { found: snap.format, expected: snapshot::FORMAT });
        }
        if snap.vehicle != self.fingerprint {
            return Err(SnapshotError::OtherVehicle { snapshot: snap.vehicle, vehicle: self.fingerprint });
        }
        let load = |c: &mut Self, sim: &mut Simulation, tel: &mut Telemetry, words: &[u64]| {
            let mut r = StateReader::new(words);
            c.load_state(&mut r, tel)?;
            sim.load_state(&mut r)?;
            r.finish()
        };
        // (A damaged snapshot fails part-way: the state before is put back. The backup's
        // buffer is kept from one restore to the next.)
        let mut w = StateWriter { words: std::mem::take(&mut self.backup), labels: None };
        w.words.clear();
        self.save_state(&mut w, tel);
        sim.save_state(&mut w);
        let result = load(self, sim, tel, &snap.state);
        if result.is_err() {
            load(self, sim, tel, &w.words).expect("a snapshot of this vehicle restores");
        }
        self.backup = w.words;
        result?;
        Ok(())
    }
}

persist_fields!(Telemetry {
    time,
    engine_rpm,
    engine_torque,
    throttle,
    running,
    clutch_slip,
    clutch_torque,
    clutch_engagement,
    clutch_temperature,
    clutch_power,
    selected_gear,
    engaged_gear,
    sleeves,
    torque_reduction,
    speed,
    acceleration,
    distance,
    wheel_speed,
    tyre_force,
    tyre_slip,
    tyre_load,
    brake_torque,
    drive_torque,
    fuel_used,
    selector,
    turbine_rpm,
    converter_torque,
    lockup_engagement,
    lockup_locked,
    lockup_mode,
    shift_phase,
    elements,
});

impl Persist for Trans {
    fn save(&self, w: &mut StateWriter) {
        match self {
            Trans::Manual(m) => m.save(w),
            Trans::Automatic(a) => a.save(w),
        }
    }
    fn load(&mut self, r: &mut StateReader) -> Result<(), SnapshotError> {
        match self {
            Trans::Manual(m) => m.load(r),
            Trans::Automatic(a) => a.load(r),
        }
    }
}

/// Saves (`save`: `w`) or loads (`load`: `r`, `?` on each) the controllers' fields named, each
/// labelled `VehicleControl.<field>` as [`persist_fields`] labels them.
macro_rules! control_fields {
    (save $c:ident, $w:ident: $($f:ident),*) => {
        $( $w.label(concat!("VehicleControl.", stringify!($f))); $c.$f.save($w); )*
    };
    (load $c:ident, $r:ident: $($f:ident),*) => {
        $( $c.$f.load($r)?; )*
    };
}

impl VehicleControl {
    /// The controllers' words: their state, with the telemetry record `tel` they last wrote in
    /// its place among the fields (the description, layout and handles are not state; the
    /// events are those of the last step); then a chassis road's coupling (only there, so that
    /// the snapshots of the other roads keep their layout).
    fn save_state(&self, w: &mut StateWriter, tel: &Telemetry) {
        control_fields!(save self, w: now, trans, ecu, accel, fuel);
        w.label("VehicleControl.telemetry");
        tel.save(w);
        control_fields!(save self, w: last_loads, slope, surface, contact, distance);
        if self.ids.chassis.is_some() {
            w.label("VehicleControl.chassis");
            self.chassis.save(w);
        }
    }

    /// Reads what [`VehicleControl::save_state`] wrote.
    fn load_state(&mut self, r: &mut StateReader, tel: &mut Telemetry) -> Result<(), SnapshotError> {
        control_fields!(load self, r: now, trans, ecu, accel, fuel);
        tel.load(r)?;
        control_fields!(load self, r: last_loads, slope, surface, contact, distance);
        if self.ids.chassis.is_some() {
            self.chassis.load(r)?;
        }
        Ok(())
    }
}
