//! Small dense linear algebra on row-major slices.
//!
//! Driveline networks are small (a handful to a few dozen coordinates), so dense kernels on
//! preallocated slices beat any sparse machinery. Nothing here allocates: callers own every
//! buffer, which is what lets the solver step without touching the heap.

/// A matrix was singular to working precision (or held a non-finite entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Singular {
    /// The column whose pivot vanished: the unknown the matrix does not determine.
    pub column: usize,
}

/// LU factorisation with partial pivoting of the `n x n` row-major matrix `a`, in place.
///
/// On success `a` holds `L` (unit lower, below the diagonal) and `U`, and `piv[k]` the row
/// swapped with row `k` at elimination step `k`.
pub fn lu_factor(a: &mut [f64], n: usize, piv: &mut [usize]) -> Result<(), Singular> {
    debug_assert!(a.len() >= n * n && piv.len() >= n);
    let mut scale = 0.0f64;
    for v in &a[..n * n] {
        scale = scale.max(v.abs());
    }
    let tiny = scale * 1e-14;
    for k in 0..n {
        let mut p = k;
        let mut best = a[k * n + k].abs();
        for i in k + 1..n {
            let v = a[i * n + k].abs();
            if v > best {
                best = v;
                p = i;
            }
        }
        if best <= tiny || !best.is_finite() {
            // Factors a caller solves with anyway give NaN (which a step reports as a
            // non-finite state), never a pivot out of range.
            for (i, p) in piv[k..n].iter_mut().enumerate() {
                *p = k + i;
            }
            a[..n * n].fill(f64::NAN);
            return Err(Singular { column: k });
        }
        piv[k] = p;
        // Rows below the pivot row are eliminated against it (rows as slices: no index
        // checks in the loops).
        let (top, below) = a[..n * n].split_at_mut((k + 1) * n);
        let pivot_row = &mut top[k * n..];
        if p != k {
            pivot_row.swap_with_slice(&mut below[(p - k - 1) * n..(p - k) * n]);
        }
        let d = pivot_row[k];
        let pivot_rest = &pivot_row[k + 1..];
        for row in below.chunks_exact_mut(n) {
            let f = row[k] / d;
            row[k] = f;
            if f != 0.0 {
                for (x, &u) in row[k + 1..].iter_mut().zip(pivot_rest) {
                    *x -= f * u;
                }
            }
        }
    }
    Ok(())
}

/// Solves `A x = b` in place (`b` becomes `x`) with the factors from [`lu_factor`].
#[inline]
pub fn lu_solve(a: &[f64], n: usize, piv: &[usize], b: &mut [f64]) {
    let a = &a[..n * n];
    let b = &mut b[..n];
    for k in 0..n {
        let p = piv[k];
        if p != k {
            b.swap(k, p);
        }
    }
    for i in 1..n {
        let row = &a[i * n..i * n + i];
        let s = dot(row, &b[..i]);
        b[i] -= s;
    }
    for i in (0..n).rev() {
        let row = &a[i * n + i + 1..(i + 1) * n];
        let s = dot(row, &b[i + 1..]);
        b[i] = (b[i] - s) / a[i * n + i];
    }
}

/// Solves `A X = B` in place for `k` right-hand sides at once (`b` holds `B` row-major,
/// `n x k`: row `i` holds entry `i` of every column), with the factors from [`lu_factor`].
/// Each column comes out as [`lu_solve`] gives it, bit for bit (the same operations in the
/// same order); the columns' sums are independent and overlap.
pub fn lu_solve_many(a: &[f64], n: usize, piv: &[usize], b: &mut [f64], k: usize) {
    if k == 0 {
        return;
    }
    let a = &a[..n * n];
    let b = &mut b[..n * k];
    for (i, &p) in piv[..n].iter().enumerate() {
        if p != i {
            let (lo, hi) = b.split_at_mut(p * k);
            lo[i * k..(i + 1) * k].swap_with_slice(&mut hi[..k]);
        }
    }
    // Forward: b_i -= sum_{j < i} L_ij b_j, each sum from -0.0 over ascending j.
    for i in 1..n {
        let (done, rest) = b.split_at_mut(i * k);
        let bi = &mut rest[..k];
        let mut s = [-0.0f64; LANES];
        for chunk in (0..k).step_by(LANES) {
            let w = (k - chunk).min(LANES);
            let s = &mut s[..w];
            s.fill(-0.0);
            for (j, &l) in a[i * n..i * n + i].iter().enumerate() {
                for (s, &x) in s.iter_mut().zip(&done[j * k + chunk..j * k + chunk + w]) {
                    *s += l * x;
                }
            }
            for (x, s) in bi[chunk..chunk + w].iter_mut().zip(s.iter()) {
                *x -= s;
            }
        }
    }
    // Back: b_i = (b_i - sum_{j > i} U_ij b_j) / U_ii.
    for i in (0..n).rev() {
        let (head, done) = b.split_at_mut((i + 1) * k);
        let bi = &mut head[i * k..];
        let d = a[i * n + i];
        let mut s = [-0.0f64; LANES];
        for chunk in (0..k).step_by(LANES) {
            let w = (k - chunk).min(LANES);
            let s = &mut s[..w];
            s.fill(-0.0);
            for (j, &u) in a[i * n + i + 1..(i + 1) * n].iter().enumerate() {
                for (s, &x) in s.iter_mut().zip(&done[j * k + chunk..j * k + chunk + w]) {
                    *s += u * x;
                }
            }
            for (x, s) in bi[chunk..chunk + w].iter_mut().zip(s.iter()) {
                *x = (*x - s) / d;
            }
        }
    }
}

/// Writes the transpose of the `rows x cols` row-major `a` into `out`, column `j` of `a`
/// becoming the row at `out[j * stride..j * stride + rows]` (`stride >= rows`; the entries
/// between rows are left as they are).
pub fn transpose(a: &[f64], rows: usize, cols: usize, out: &mut [f64], stride: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    for (i, row) in a[..rows * cols].chunks_exact(cols).enumerate() {
        for (j, &x) in row.iter().enumerate() {
            out[j * stride + i] = x;
        }
    }
}

/// Right-hand sides [`lu_solve_many`] carries at once.
const LANES: usize = 16;

/// Reduces the `rows x cols` matrix `a` to reduced row echelon form in place, with partial
/// pivoting by column. Returns the rank; `pivot_col[r]` is the pivot column of row `r` for
/// `r < rank`. Entries below `tol` (absolute) are treated as zero.
pub fn rref(a: &mut [f64], rows: usize, cols: usize, tol: f64, pivot_col: &mut [usize]) -> usize {
    let mut r = 0;
    for c in 0..cols {
        if r == rows {
            break;
        }
        let mut p = r;
        let mut best = a[r * cols + c].abs();
        for i in r + 1..rows {
            let v = a[i * cols + c].abs();
            if v > best {
                best = v;
                p = i;
            }
        }
        if best <= tol {
            for i in r..rows {
                a[i * cols + c] = 0.0;
            }
            continue;
        }
        // (Rows as slices: no index checks in the loops.)
        let (before, rest) = a[..rows * cols].split_at_mut(r * cols);
        let (pivot_row, after) = rest.split_at_mut(cols);
        if p != r {
            pivot_row.swap_with_slice(&mut after[(p - r - 1) * cols..(p - r) * cols]);
        }
        let d = pivot_row[c];
        for x in pivot_row.iter_mut() {
            *x /= d;
        }
        pivot_row[c] = 1.0;
        for row in before.chunks_exact_mut(cols).chain(after.chunks_exact_mut(cols)) {
            let f = row[c];
            if f != 0.0 {
                for (x, &u) in row.iter_mut().zip(pivot_row.iter()) {
                    *x -= f * u;
                }
                row[c] = 0.0;
            }
        }
        pivot_col[r] = c;
        r += 1;
    }
    r
}

/// `sum a_i b_i` over the shorter of the two slices, in ascending `i` from -0.0 (as
/// `Iterator::sum` adds), without index checks in the loop.
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `y = A x` for a `rows x cols` row-major `A`.
#[inline]
pub fn matvec(a: &[f64], rows: usize, cols: usize, x: &[f64], y: &mut [f64]) {
    for i in 0..rows {
        let row = &a[i * cols..(i + 1) * cols];
        let mut s = 0.0;
        for j in 0..cols {
            s += row[j] * x[j];
        }
        y[i] = s;
    }
}

/// `y = A^T x` for a `rows x cols` row-major `A` (so `y` has `cols` entries).
#[inline]
pub fn matvec_t(a: &[f64], rows: usize, cols: usize, x: &[f64], y: &mut [f64]) {
    y[..cols].fill(0.0);
    for i in 0..rows {
        let xi = x[i];
        if xi != 0.0 {
            let row = &a[i * cols..(i + 1) * cols];
            for j in 0..cols {
                y[j] += row[j] * xi;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_right_hand_sides_solve_as_one_each() {
        // Pseudo-random matrices that need pivoting, and right-hand sides across the lane
        // width: every column bit for bit as `lu_solve` gives it.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for &(n, k) in &[(1, 1), (3, 2), (6, 12), (12, 16), (13, 17), (17, 40)] {
            let mut a: Vec<f64> = (0..n * n).map(|_| rnd()).collect();
            let mut piv = vec![0; n];
            lu_factor(&mut a, n, &mut piv).unwrap();
            let b: Vec<f64> = (0..n * k).map(|_| rnd()).collect();
            let mut many = b.clone();
            lu_solve_many(&a, n, &piv, &mut many, k);
            for c in 0..k {
                let mut one: Vec<f64> = (0..n).map(|i| b[i * k + c]).collect();
                lu_solve(&a, n, &piv, &mut one);
                for i in 0..n {
                    assert_eq!(many[i * k + c].to_bits(), one[i].to_bits(), "n {n} k {k} column {c} row {i}");
                }
            }
        }
    }

    #[test]
    fn transpose_writes_columns_as_strided_rows() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 x 3
        let mut out = [-1.0; 9];
        transpose(&a, 2, 3, &mut out, 3);
        assert_eq!(out, [1.0, 4.0, -1.0, 2.0, 5.0, -1.0, 3.0, 6.0, -1.0]);
    }

    #[test]
    fn lu_solves_a_pivoting_system() {
        // A permutation-heavy 3x3 whose exact solution is (1, 2, 3).
        let mut a = [0.0, 2.0, 1.0, 1.0, 1.0, 1.0, 4.0, 0.0, 3.0];
        let mut b = [7.0, 6.0, 13.0];
        let mut piv = [0; 3];
        lu_factor(&mut a, 3, &mut piv).unwrap();
        lu_solve(&a, 3, &piv, &mut b);
        for (x, e) in b.iter().zip([1.0, 2.0, 3.0]) {
            assert!((x - e).abs() < 1e-14, "{x} vs {e}");
        }
    }

    #[test]
    fn lu_reports_singular() {
        let mut a = [1.0, 2.0, 2.0, 4.0];
        assert_eq!(lu_factor(&mut a, 2, &mut [0; 2]), Err(Singular { column: 1 }));
    }

    #[test]
    fn rref_finds_rank_of_redundant_rows() {
        // Two identical lock rows and one gear row over three coordinates: rank 2.
        let mut a = [-1.0, 1.0, 0.0, -1.0, 1.0, 0.0, 0.0, 1.0, -3.0];
        let mut piv = [0; 3];
        let rank = rref(&mut a, 3, 3, 1e-12, &mut piv);
        assert_eq!(rank, 2);
        assert_eq!(&piv[..2], &[0, 1]);
    }
}
