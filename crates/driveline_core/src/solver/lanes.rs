//! Dense kernels over column-stored maps, written so that independent sums overlap.

/// `out[a] = sum_i cols[i w + a] x[i]` for every `a < out.len()`, where `cols` holds a
/// matrix by columns (`x.len()` of them, `w` apart): `linalg::dot` of each row with `x`, bit
/// for bit (each sum from -0.0 over ascending `i`, each product the row entry times `x[i]`),
/// all rows at once so that the independent sums overlap.
pub(super) fn columns_dot(cols: &[f64], w: usize, x: &[f64], out: &mut [f64]) {
    out.fill(-0.0);
    for (col, &xi) in cols.chunks_exact(w.max(1)).zip(x) {
        for (o, &c) in out.iter_mut().zip(col) {
            *o += c * xi;
        }
    }
}

/// Gathers the non-zero entries of `x` into `nz` as `(index, value)`, ascending, and returns
/// them. Most nodes of a driveline carry no applied torque (gear members, locked shafts), so
/// the constraint-torque maps run over these only.
#[inline]
pub(super) fn nonzeros<'a>(x: &[f64], nz: &'a mut [(u32, f64)]) -> &'a [(u32, f64)] {
    // Every entry is written and only the non-zeros advance (no branch to mispredict).
    let mut k = 0;
    for (i, &v) in x.iter().enumerate() {
        nz[k] = (i as u32, v);
        k += usize::from(v != 0.0);
    }
    &nz[..k]
}

/// `out = map x` for a column-major `map` (column `k` at `k * stride`, `out.len()` rows), from
/// the non-zeros of `x` ([`nonzeros`]): each row sums in ascending columns from +0.0.
#[inline]
pub(super) fn map_columns(map: &[f64], stride: usize, xnz: &[(u32, f64)], out: &mut [f64]) {
    map_columns_from(map, stride, xnz, 0, out);
}

/// [`map_columns`] for the rows `first..first + out.len()` of the map only.
#[inline]
pub(super) fn map_columns_from(map: &[f64], stride: usize, xnz: &[(u32, f64)], first: usize, out: &mut [f64]) {
    map_columns_in::<false>(map, stride, xnz, first, out);
}

/// `out += map x` over the rows `first..first + out.len()`, as [`map_columns_from`] forms its
/// sums but starting from `out`'s values.
#[inline]
pub(super) fn map_columns_onto(map: &[f64], stride: usize, xnz: &[(u32, f64)], first: usize, out: &mut [f64]) {
    map_columns_in::<true>(map, stride, xnz, first, out);
}

/// [`map_columns_from`] (`ONTO` false: the sums start from +0.0) or [`map_columns_onto`].
#[inline]
pub(super) fn map_columns_in<const ONTO: bool>(
    map: &[f64],
    stride: usize,
    xnz: &[(u32, f64)],
    first: usize,
    out: &mut [f64],
) {
    // Up to sixteen rows in registers, in whole lanes of four: the entries of a column past the
    // last row (the next column's, or the map's padding) are formed and dropped.
    match out.len() {
        1..=4 => return map_lanes::<4, ONTO>(map, stride, xnz, first, out),
        5..=8 => return map_lanes::<8, ONTO>(map, stride, xnz, first, out),
        9..=12 => return map_lanes::<12, ONTO>(map, stride, xnz, first, out),
        13..=16 => return map_lanes::<16, ONTO>(map, stride, xnz, first, out),
        _ => {}
    }
    if !ONTO {
        out.fill(0.0);
    }
    let r = out.len();
    for &(k, v) in xnz {
        let at = k as usize * stride + first;
        let col = &map[at..at + r];
        for (o, c) in out.iter_mut().zip(col) {
            *o += c * v;
        }
    }
}

/// Entries past the last column of a column-major map, so that [`map_lanes`] may read up to
/// three entries past any column's rows (its lanes round a row count up to a multiple of four).
pub(super) const MAP_PAD: usize = 3;

/// [`map_columns_in`] with its `out.len() <= R` rows in `R` accumulators: each row sums the
/// same terms in the same order from +0.0 or (`ONTO`) from its value in `out`.
#[inline]
pub(super) fn map_lanes<const R: usize, const ONTO: bool>(
    map: &[f64],
    stride: usize,
    xnz: &[(u32, f64)],
    first: usize,
    out: &mut [f64],
) {
    let mut acc = [0.0; R];
    if ONTO {
        acc[..out.len()].copy_from_slice(out);
    }
    for &(k, v) in xnz {
        let at = k as usize * stride + first;
        let col = &map[at..at + R];
        for j in 0..R {
            acc[j] += col[j] * v;
        }
    }
    out.copy_from_slice(&acc[..out.len()]);
}
