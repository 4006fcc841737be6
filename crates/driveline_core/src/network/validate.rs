//! Parameter checks of every element kind, with messages that say what is allowed.

use super::*;

pub(super) fn param(element: &str, message: String) -> BuildError {
    BuildError::Parameter { element: element.to_string(), message }
}

pub(super) fn check(element: &str, name: &str, v: f64, ok: bool, allowed: &str) -> Result<(), BuildError> {
    if !v.is_finite() {
        let sep = if allowed.is_empty() { "" } else { " " };
        return Err(param(element, format!("`{name}` is {v}; it must be a finite number{sep}{allowed}")));
    }
    if !ok {
        return Err(param(element, format!("`{name}` is {v}; it must be {allowed}")));
    }
    if let Some(range) = crate::limits::outside(name, v) {
        return Err(param(element, format!("`{name}` is {v}; it must be {range}")));
    }
    Ok(())
}

const MASS_ALLOWED_J: &str = "0 (a massless node) or at least 1e-12 kg m^2";
const MASS_ALLOWED_M: &str = "0 (a massless node) or at least 1e-12 kg";

fn massless_or_above(v: f64) -> bool {
    v == 0.0 || v >= crate::limits::MIN_MASS
}

pub(super) fn check_opt(element: &str, name: &str, v: Option<f64>) -> Result<(), BuildError> {
    if let Some(v) = v {
        check(element, name, v, true, "")?;
    }
    Ok(())
}

/// Checks every parameter of one element. Public so that file loaders can report positions.
pub fn validate_element(name: &str, kind: &ElementKind) -> Result<(), BuildError> {
    use ElementKind::*;
    match kind {
        Inertia { J, phi_start, w_start } => {
            check(name, "J", *J, massless_or_above(*J), MASS_ALLOWED_J)?;
            check_opt(name, "phi_start", *phi_start)?;
            check_opt(name, "w_start", *w_start)
        }
        Fixed { phi0 } => check(name, "phi0", *phi0, true, ""),
        Torque { tau, .. } => tau.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m }),
        ConstantTorque { tau_constant, .. } => check(name, "tau_constant", *tau_constant, true, ""),
        Position { phi_ref, .. } => {
            phi_ref.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        Speed { w_ref, phi_start, .. } => {
            w_ref.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "phi_start", *phi_start)
        }
        KinematicClutch { command, shift_time } => {
            command.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check(name, "shift_time", *shift_time, *shift_time > 0.0, "> 0 s")
        }
        TorqueStep { step_torque, offset_torque, start_time, .. } => {
            check(name, "step_torque", *step_torque, true, "")?;
            check(name, "offset_torque", *offset_torque, true, "")?;
            check(name, "start_time", *start_time, true, "")
        }
        LinearSpeedDependentTorque { tau_nominal, w_nominal, .. } => {
            check(name, "tau_nominal", *tau_nominal, true, "")?;
            check(name, "w_nominal", *w_nominal, *w_nominal > 0.0, "> 0 rad/s")
        }
        InverseSpeedDependentTorque { tau_nominal, w_nominal, w0, .. } => {
            check(name, "tau_nominal", *tau_nominal, true, "")?;
            check(name, "w_nominal", *w_nominal, *w_nominal > 0.0, "> 0 rad/s")?;
            check(name, "w0", *w0, *w0 > 0.0, "> 0 rad/s")
        }
        SignTorque { tau_nominal, w0, .. } => {
            check(name, "tau_nominal", *tau_nominal, true, "")?;
            check(name, "w0", *w0, *w0 > 0.0, "> 0 rad/s")
        }
        AngleSensor {}
        | SpeedSensor {}
        | RelAngleSensor {}
        | RelSpeedSensor {}
        | TorqueSensor {}
        | PowerSensor {}
        | AccSensor {}
        | RelAccSensor {}
        | MultiSensor {} => Ok(()),
        Move { phi, w, a, .. } => {
            for (field, s) in [("phi", phi), ("w", w), ("a", a)] {
                s.validate()
                    .map_err(|m| BuildError::Signal { element: name.into(), message: format!("`{field}`: {m}") })?;
            }
            Ok(())
        }
        Disc { deltaPhi } => check(name, "deltaPhi", *deltaPhi, true, ""),
        RelativeStates { phi_rel_start, w_rel_start } => {
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        InitializeFlange { phi_start, w_start } => {
            check_opt(name, "phi_start", *phi_start)?;
            check_opt(name, "w_start", *w_start)
        }
        EddyCurrentTorque { tau_nominal, w_nominal, TRef, alpha20, T, .. } => {
            tau_nominal.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check(name, "w_nominal", *w_nominal, *w_nominal > 0.0, "> 0 rad/s")?;
            check(name, "TRef", *TRef, *TRef > 0.0, "> 0 K")?;
            check(name, "alpha20", *alpha20, true, "")?;
            check(name, "T", *T, *T > 0.0, "> 0 K")
        }
        HeatCapacitor { C, T_start } => {
            check(name, "C", *C, *C > 0.0, "> 0 J/K")?;
            check(name, "T_start", *T_start, *T_start > 0.0, "> 0 K")
        }
        ThermalConductor { G } => check(name, "G", *G, *G >= 0.0, ">= 0 W/K"),
        Convection { Gc } => Gc.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m }),
        FixedTemperature { T } => check(name, "T", *T, *T > 0.0, "> 0 K"),
        FixedHeatFlow { Q_flow, T_ref, alpha } => {
            check(name, "Q_flow", *Q_flow, true, "")?;
            check(name, "T_ref", *T_ref, *T_ref > 0.0, "> 0 K")?;
            check(name, "alpha", *alpha, true, "")
        }
        IdealGearR2T { ratio } => check(name, "ratio", *ratio, *ratio != 0.0, "non-zero (rad/m)"),
        Torque2 { tau } => tau.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m }),
        Accelerate { a_ref, w_start, phi_start, .. } => {
            a_ref.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check(name, "w_start", *w_start, true, "")?;
            check_opt(name, "phi_start", *phi_start)
        }
        ConstantSpeed { w_fixed, phi_start, .. } => {
            check(name, "w_fixed", *w_fixed, true, "")?;
            check_opt(name, "phi_start", *phi_start)
        }
        QuadraticSpeedDependentTorque { tau_nominal, w_nominal, .. } => {
            check(name, "tau_nominal", *tau_nominal, true, "")?;
            check(name, "w_nominal", *w_nominal, *w_nominal > 0.0, "> 0 rad/s")
        }
        IdealGear { ratio, .. } => check(name, "ratio", *ratio, *ratio != 0.0, "non-zero (phi_a/phi_b)"),
        LossyGear { ratio, loss_table, .. } => check_lossy_gear(name, *ratio, loss_table),
        Gearbox { ratio, loss_table, c, d, b, phi_rel_start, w_rel_start, .. } => {
            check_lossy_gear(name, *ratio, loss_table)?;
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check(name, "b", *b, *b >= 0.0, ">= 0 rad (total backlash)")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        IdealPlanetary { ratio } => check(name, "ratio", *ratio, *ratio > 0.0, "> 0 (ring teeth / sun teeth)"),
        Spring { c, phi_rel0, phi_rel_start, w_rel_start } => {
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "phi_rel0", *phi_rel0, true, "")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        Damper { d, phi_rel_start, w_rel_start } => {
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        SpringDamper { c, d, phi_rel0, phi_rel_start, w_rel_start } => {
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check(name, "phi_rel0", *phi_rel0, true, "")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        ElastoBacklash { c, d, b, phi_rel0, phi_rel_start, w_rel_start }
        | ElastoBacklash2 { c, d, b, phi_rel0, phi_rel_start, w_rel_start } => {
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check(name, "b", *b, *b >= 0.0, ">= 0 rad (total backlash)")?;
            check(name, "phi_rel0", *phi_rel0, true, "")?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        Clutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start }
        | OneWayClutch { mu_pos, peak, cgeo, fn_max, f_normalized, phi_rel_start, w_rel_start } => {
            check_friction(name, mu_pos, *peak, *cgeo, *fn_max)?;
            f_normalized.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        ElasticClutch { S, D, limit, phi_rel_start, w_rel_start } => {
            check(name, "S", *S, *S > 0.0, "> 0 N m/rad")?;
            check(name, "D", *D, *D >= 0.0, ">= 0 N m s/rad")?;
            limit.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "phi_rel_start", *phi_rel_start)?;
            check_opt(name, "w_rel_start", *w_rel_start)
        }
        Brake { mu_pos, peak, cgeo, fn_max, f_normalized, .. } => {
            check_friction(name, mu_pos, *peak, *cgeo, *fn_max)?;
            f_normalized.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        BearingFriction { tau_pos, peak, .. } => {
            tau_pos.validate().map_err(|e| param(name, format!("`tau_pos`: {e}")))?;
            if tau_pos.points()[0].0 != 0.0 {
                return Err(param(name, "`tau_pos` must start at w = 0".into()));
            }
            if tau_pos.y_range().0 < 0.0 {
                return Err(param(name, "`tau_pos` torques must be >= 0 N m".into()));
            }
            if let Some(why) = crate::limits::table_outside(tau_pos.points(), 1e4, 1e6) {
                return Err(param(name, format!("`tau_pos` (rad/s, N m): {why}")));
            }
            check(name, "peak", *peak, *peak >= 1.0, ">= 1 (static / kinetic)")
        }
        Mass { m, s_start, v_start } => {
            check(name, "m", *m, massless_or_above(*m), MASS_ALLOWED_M)?;
            check_opt(name, "s_start", *s_start)?;
            check_opt(name, "v_start", *v_start)
        }
        IdealRollingWheel { radius } => check(name, "radius", *radius, *radius > 0.0, "> 0 m"),
        LimitedSlip { preload, power_ramp, coast_ramp, input, .. } => {
            check_limited_slip(name, *preload, *power_ramp, *coast_ramp, input)
        }
        DogClutch { teeth, c, d, backlash, offset, engaged } => {
            if *teeth == 0 {
                return Err(param(name, "`teeth` is 0; a dog clutch has at least one dog".into()));
            }
            let pitch = std::f64::consts::TAU / *teeth as f64;
            check(name, "c", *c, *c > 0.0, "> 0 N m/rad")?;
            check(name, "d", *d, *d >= 0.0, ">= 0 N m s/rad")?;
            check(name, "backlash", *backlash, *backlash >= 0.0 && *backlash < pitch, "in [0, 2 pi / teeth) rad")?;
            check(name, "offset", *offset, offset.abs() <= pitch / 2.0, "within +-pi/teeth rad (half a dog pitch)")?;
            engaged.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        LinearSpeed { v_ref, s_start, .. } => {
            v_ref.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })?;
            check_opt(name, "s_start", *s_start)
        }
        Force { f } => f.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m }),
        TorqueConverter { map, .. } => map.validate().map_err(|m| param(name, format!("`map`: {m}"))),
        Engine { map, throttle, .. } => {
            map.build().map_err(|m| param(name, format!("`map`: {m}")))?;
            throttle.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        Tyre { radius, mf, load, v_low } => {
            check(name, "radius", *radius, *radius > 0.0, "> 0 m")?;
            check(name, "v_low", *v_low, *v_low > 0.0, "> 0 m/s")?;
            mf.validate().map_err(|m| param(name, format!("`mf`: {m}")))?;
            load.validate().map_err(|m| BuildError::Signal { element: name.into(), message: m })
        }
        QuadraticSpeedDependentForce { f_nominal, v_nominal, .. } => {
            check(name, "f_nominal", *f_nominal, true, "")?;
            check(name, "v_nominal", *v_nominal, *v_nominal > 0.0, "> 0 m/s")
        }
    }
}

pub(super) fn check_friction(
    name: &str,
    mu: &crate::Table1D,
    peak: f64,
    cgeo: f64,
    fn_max: f64,
) -> Result<(), BuildError> {
    mu.validate().map_err(|e| param(name, format!("`mu_pos`: {e}")))?;
    if mu.points()[0].0 != 0.0 {
        return Err(param(name, format!("`mu_pos` must start at w = 0, not {}", mu.points()[0].0)));
    }
    if mu.y_range().0 < 0.0 {
        return Err(param(name, "`mu_pos` values must be >= 0".into()));
    }
    if let Some(why) = crate::limits::table_outside(mu.points(), 1e4, 10.0) {
        return Err(param(name, format!("`mu_pos` (rad/s, friction coefficient): {why}")));
    }
    check(name, "peak", peak, peak >= 1.0, ">= 1 (static / kinetic friction)")?;
    check(name, "cgeo", cgeo, cgeo >= 0.0, ">= 0 m")?;
    check(name, "fn_max", fn_max, fn_max >= 0.0, ">= 0 N")
}

/// A LossyGear's ratio and loss table: rows `[|w_a|, eta_mf1, eta_mf2, tau_bf1, tau_bf2]` from
/// `|w_a| = 0` by increasing speed, efficiencies in [0.01, 1] (the plausible range: a worm gear
/// at standstill is about 0.2; 1e-300 made the loss torque infinite), bearing torques >= 0.
fn check_lossy_gear(name: &str, ratio: f64, loss_table: &[[f64; 5]]) -> Result<(), BuildError> {
    check(name, "ratio", ratio, ratio != 0.0, "non-zero (phi_a/phi_b)")?;
    if loss_table.is_empty() {
        return Err(param(name, "`loss_table` is empty; give rows [|w_a|, eta_mf1, eta_mf2, tau_bf1, tau_bf2]".into()));
    }
    if loss_table[0][0] != 0.0 {
        return Err(param(name, format!("`loss_table` must start at |w_a| = 0, not {}", loss_table[0][0])));
    }
    for (k, row) in loss_table.iter().enumerate() {
        if row.iter().any(|v| !v.is_finite()) {
            return Err(param(name, format!("`loss_table` row {k} holds a non-finite value")));
        }
        if k > 0 && row[0] <= loss_table[k - 1][0] {
            return Err(param(
                name,
                format!("`loss_table` speeds must increase; row {k} has {} after {}", row[0], loss_table[k - 1][0]),
            ));
        }
        if !(row[1] >= 0.01 && row[1] <= 1.0 && row[2] >= 0.01 && row[2] <= 1.0) {
            return Err(param(
                name,
                format!(
                    "`loss_table` row {k}: efficiencies must be within 0.01 .. 1 (the plausible range), got {} and {}",
                    row[1], row[2]
                ),
            ));
        }
        if row[3] < 0.0 || row[4] < 0.0 {
            return Err(param(name, format!("`loss_table` row {k}: bearing friction torques must be >= 0 N m")));
        }
        if row[0] > 1e4 || row[3] > 1e6 || row[4] > 1e6 {
            return Err(param(
                name,
                format!("`loss_table` row {k} is outside the plausible range (speed <= 1e4 rad/s, torques <= 1e6 N m)"),
            ));
        }
    }
    Ok(())
}

/// A limited-slip pack's preload and ramps (>= 0) and its one or two input gears.
fn check_limited_slip(
    name: &str,
    preload: f64,
    power_ramp: f64,
    coast_ramp: f64,
    input: &[(String, f64)],
) -> Result<(), BuildError> {
    check(name, "preload", preload, preload >= 0.0, ">= 0 N m")?;
    check(name, "power_ramp", power_ramp, power_ramp >= 0.0, ">= 0")?;
    check(name, "coast_ramp", coast_ramp, coast_ramp >= 0.0, ">= 0")?;
    if input.is_empty() || input.len() > 2 {
        return Err(param(name, format!("`input` names {} gears; give one or two", input.len())));
    }
    for (g, sc) in input {
        check(name, "input", *sc, true, "")?;
        if g.is_empty() {
            return Err(param(name, "`input` gear name is empty".into()));
        }
    }
    Ok(())
}
