//! Kernels as the runtime keeps them, and the one kernel intake.
//!
//! Every kernel, a plugin's or a fused one, enters through this module and leaves it as a
//! [`KernelEntry`]: IR that is validated once ([`ValidKernel`]), with math lowered to plain
//! arithmetic, a name that carries its provenance, and a [`KernelId`] that is a hash of its
//! content. Passes and back ends trust an entry and never validate it again.

use std::hash::{Hash, Hasher};

use weft_ir::flat::FlatKernel;
use weft_ir::{Kernel, ValidKernel};

use crate::{Error, Result};

/// The name of a kernel across the runtime: the full 256-bit BLAKE3 hash of its content (its
/// IR and its name), so that the same kernel has the same id in every run and on every rank,
/// and back ends can cache compiled code by it.
///
/// An id is a name, never a proof: every cache keyed by it confirms a hit against the IR it
/// stands for before using it (see `SECURITY.md`), so even two kernels with one id (which a
/// 256-bit hash makes infeasible to find) cannot run each other's code.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelId(pub [u8; 32]);

/// Hashes the first 128 bits: a hash table's bucket needs no more of a BLAKE3 hash, and
/// equality still compares all 256 (every launch looks its kernel up, and hashing the whole id
/// cost a replayed launch about 300 instructions).
impl std::hash::Hash for KernelId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let [a, b, ..] = self.words();
        state.write_u64(a);
        state.write_u64(b);
    }
}

impl KernelId {
    /// The first 64 bits, for traces and short names.
    pub fn short(&self) -> u64 {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.0[..8]);
        u64::from_le_bytes(first)
    }

    /// The id as four little-endian words (for canonical keys).
    pub fn words(&self) -> [u64; 4] {
        let mut out = [0u64; 4];
        for (w, chunk) in out.iter_mut().zip(self.0.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
        out
    }
}

impl std::fmt::Display for KernelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.short())
    }
}

impl std::fmt::Debug for KernelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelId(")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// A kernel ready for back ends: validated, math lowered, named and identified.
#[derive(Debug)]
pub struct KernelEntry {
    id: KernelId,
    ir: ValidKernel,
    /// Per parameter, the store parameter whose parallel loop overwrites it before anything
    /// reads it ([`weft_ir::coverage::overwritten_by`]).
    overwritten_by: Vec<Option<u32>>,
    /// Per parameter, whether the kernel touches it only at its loops' own indices
    /// ([`weft_ir::coverage::pointwise`]).
    pointwise: Vec<bool>,
    /// Per parameter, the store parameters whose memory it may take over when their contents
    /// die with the kernel ([`weft_ir::coverage::shares_in_place`]).
    shares_in_place: Vec<Vec<u32>>,
    /// The dtype, if the kernel is the canonical dense product ([`weft_ir::product`]).
    product: Option<weft_ir::DType>,
    /// The dtype, if the kernel is the canonical product by rows
    /// ([`weft_ir::product::matmul_rows`]).
    rows_product: Option<weft_ir::DType>,
    /// The element type, if the kernel is the canonical product over tiles of `C`
    /// ([`weft_ir::product::recognize_tiled`]).
    tiled_product: Option<weft_ir::DType>,
    /// The element type, if the kernel is the plugin's product of a matrix by a vector by
    /// parts ([`weft_ir::matvec::recognize_parts`]).
    matvec_parts: Option<weft_ir::DType>,
    /// The kernel parameter of each store argument, in order (ascending).
    store_params: Vec<usize>,
    /// The store parameters' (dtype, rank, privilege), in order.
    store_signature: Vec<(weft_ir::DType, u32, weft_ir::Privilege)>,
    /// The scalar parameters' dtypes, in order.
    scalar_signature: Vec<weft_ir::DType>,
    /// The instructions of its body, nested ones included.
    insts: usize,
}

impl KernelEntry {
    /// The kernel's id.
    pub fn id(&self) -> KernelId {
        self.id
    }

    /// Its name: `plugin.key` for a plugin's kernel, `fused(...)` for a fused one. Errors and
    /// traces show it.
    pub fn name(&self) -> &str {
        &self.ir.name
    }

    /// The validated IR.
    pub fn ir(&self) -> &ValidKernel {
        &self.ir
    }

    /// For kernel parameter `param`, the store parameter whose parallel loop writes every
    /// element of `param`'s sub-store before anything reads it, when both sub-stores have the
    /// same extents (see [`weft_ir::coverage`]); `None` when the kernel may read it first.
    pub fn overwritten_by(&self, param: usize) -> Option<u32> {
        self.overwritten_by.get(param).copied().flatten()
    }

    /// Whether the kernel touches parameter `param` only at the indices of the parallel loop
    /// it runs in, so that each point reads and writes only its own element of the
    /// parameter's sub-store (see [`weft_ir::coverage::pointwise`]).
    pub fn pointwise(&self, param: usize) -> bool {
        self.pointwise.get(param).copied().unwrap_or(false)
    }

    /// The store parameters whose memory parameter `param` may take over, when nothing reads
    /// them after the kernel and their sub-stores match `param`'s at every point (see
    /// [`weft_ir::coverage::shares_in_place`]).
    pub fn shares_in_place(&self, param: usize) -> &[u32] {
        self.shares_in_place.get(param).map_or(&[], Vec::as_slice)
    }

    /// The element type, if the kernel is exactly the canonical dense product
    /// ([`weft_ir::product::recognize`]): such a task runs alone, never fused, so that a back
    /// end may run it through a tuned routine with the same bits.
    pub fn product(&self) -> Option<weft_ir::DType> {
        self.product
    }

    /// The element type, if the kernel is exactly the canonical product by rows
    /// ([`weft_ir::product::recognize_rows`]): such a task runs alone too, so that a back end
    /// may run its blocks of points through a routine with the same bits.
    pub fn rows_product(&self) -> Option<weft_ir::DType> {
        self.rows_product
    }

    /// The element type, if the kernel is exactly the product of a matrix by a vector by parts
    /// ([`weft_ir::matvec::recognize_parts`]): the runtime may launch it over a grid that
    /// splits `k` ([`crate::matvec_grid`]). It fuses as any kernel where it keeps its launch.
    pub fn matvec_parts(&self) -> Option<weft_ir::DType> {
        self.matvec_parts
    }

    /// The element type, if the kernel is exactly the canonical product over tiles of `C`
    /// ([`weft_ir::product::recognize_tiled`]) or over a layer of a 2.5-D grid
    /// ([`weft_ir::product::recognize_layered`], `C` of rank 3, one layer per point): each
    /// point sees its own panel of `BT`. Such a task runs alone too; a back end may run it
    /// through the same routine as [`KernelEntry::product`], with `BT`'s rows counted from the
    /// panel's first.
    pub fn tiled_product(&self) -> Option<weft_ir::DType> {
        self.tiled_product
    }

    /// Whether a task of this kernel runs alone, never fused: a canonical product
    /// ([`KernelEntry::product`], [`KernelEntry::tiled_product`] or
    /// [`KernelEntry::rows_product`]).
    pub fn runs_alone(&self) -> bool {
        self.product.is_some() || self.tiled_product.is_some() || self.rows_product.is_some()
    }

    /// The store parameters' (dtype, rank, privilege), in order: what a task's store
    /// arguments must match.
    pub fn store_signature(&self) -> &[(weft_ir::DType, u32, weft_ir::Privilege)] {
        &self.store_signature
    }

    /// The scalar parameters' dtypes, in order: what a task's scalars must match.
    pub fn scalar_signature(&self) -> &[weft_ir::DType] {
        &self.scalar_signature
    }

    /// The number of instructions of its body, nested ones included
    /// ([`weft_ir::validate::count_insts`]).
    pub fn insts(&self) -> usize {
        self.insts
    }

    /// The kernel parameter of store argument `arg` (the `arg`-th store parameter).
    pub fn store_param(&self, arg: usize) -> Option<usize> {
        self.store_params.get(arg).copied()
    }

    /// The store argument whose kernel parameter is `param` (the inverse of
    /// [`KernelEntry::store_param`]), if `param` is a store parameter.
    pub fn store_arg(&self, param: usize) -> Option<usize> {
        self.store_params.binary_search(&param).ok()
    }

    fn from_valid(id: KernelId, ir: ValidKernel) -> KernelEntry {
        let overwritten_by = weft_ir::coverage::overwritten_by(&ir);
        let pointwise = weft_ir::coverage::pointwise(&ir);
        let shares_in_place = weft_ir::coverage::shares_in_place(&ir);
        let product = weft_ir::product::recognize(&ir);
        let rows_product = weft_ir::product::recognize_rows(&ir);
        let tiled_product = weft_ir::product::recognize_tiled(&ir)
            .or_else(|| weft_ir::product::recognize_layered(&ir));
        let matvec_parts = weft_ir::matvec::recognize_parts(&ir);
        let store_params = ir
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p, weft_ir::Param::Store { .. }))
            .map(|(i, _)| i)
            .collect();
        let store_signature = weft_ir::Param::stores(&ir.params);
        let scalar_signature = weft_ir::Param::scalars(&ir.params);
        let insts = weft_ir::validate::count_insts(&ir.body);
        KernelEntry {
            id,
            ir,
            overwritten_by,
            pointwise,
            shares_in_place,
            product,
            rows_product,
            tiled_product,
            matvec_parts,
            store_params,
            store_signature,
            scalar_signature,
            insts,
        }
    }

    /// An entry for IR that Weft built itself (a fused kernel), with math already lowered;
    /// its id is the hash of its content, as a plugin's kernel's is, so fused kernels that
    /// differ only in what their tasks' extents or tiles were share compiled code.
    /// Validation failing here is a bug in the passes, not in a plugin.
    pub fn from_passes(ir: Kernel) -> Result<KernelEntry> {
        let name = ir.name.clone();
        let ir = ValidKernel::new(ir).map_err(|e| {
            Error::Internal(format!("the passes made an invalid kernel `{name}`: {e}"))
        })?;
        Ok(KernelEntry::from_valid(content_id(&ir), ir))
    }

    /// **For tests of the caches' defenses only**: an entry for `ir` whose id is `id`, not
    /// the hash of its content. It forges an id collision, which the caches must catch (a
    /// plugin cannot reach this: its kernels enter through [`plugin_kernel`]).
    #[doc(hidden)]
    pub fn with_forged_id(ir: Kernel, id: KernelId) -> Result<KernelEntry> {
        let name = ir.name.clone();
        let ir = ValidKernel::new(ir)
            .map_err(|e| Error::Internal(format!("an invalid kernel `{name}`: {e}")))?;
        Ok(KernelEntry::from_valid(id, ir))
    }

    /// Whether `other` is this kernel: the same entry, or one with the same id and the same
    /// IR. Caches keyed by [`KernelId`] confirm every hit with it.
    pub fn same_kernel(&self, other: &KernelEntry) -> bool {
        std::ptr::eq(self, other) || (self.id == other.id && *self.ir == *other.ir)
    }

    /// An entry for a kernel that a test or a benchmark builds directly: validated, math
    /// lowered and named `name`, as a plugin's kernel would be.
    pub fn new(name: &str, ir: &Kernel) -> Result<KernelEntry> {
        intake(name, ir).map_err(|message| Error::Usage(format!("kernel `{name}`: {message}")))
    }
}

/// The error of a cache that finds another kernel (`cached`, by name) under the id of
/// `kernel`: an id collision, refused rather than run (see [`KernelEntry::same_kernel`]).
pub fn id_collision(cached: &str, kernel: &KernelEntry) -> Error {
    Error::Compile {
        kernel: kernel.name().to_string(),
        message: format!(
            "another kernel, `{cached}`, is cached under this kernel's id {:?}; the cache \
             refuses to run one kernel's code for another",
            kernel.id()
        ),
    }
}

/// The kernel intake for a plugin's kernel body: flat form to IR, validation, math lowering,
/// naming and the content id. The kernel is named `plugin.key`, or `key` itself where the
/// author already began it with the plugin's name (`stats.mean.f64` stays as written).
pub fn plugin_kernel(plugin: &str, key: &str, flat: &FlatKernel) -> Result<KernelEntry> {
    let invalid = |message: String| Error::InvalidIr {
        plugin: plugin.to_string(),
        key: key.to_string(),
        message,
    };
    let ir = weft_ir::flat::from_flat(flat).map_err(|e| invalid(e.to_string()))?;
    intake(&kernel_name(plugin, key), &ir).map_err(invalid)
}

/// The name of `plugin`'s kernel `key`: the key the author wrote, prefixed with the plugin's
/// name unless it starts with it.
pub fn kernel_name(plugin: &str, key: &str) -> String {
    match key.strip_prefix(plugin) {
        Some(rest) if rest.starts_with('.') => key.to_string(),
        _ => format!("{plugin}.{key}"),
    }
}

fn intake(name: &str, ir: &Kernel) -> std::result::Result<KernelEntry, String> {
    weft_ir::validate(ir).map_err(|e| e.to_string())?;
    // Math functions become plain arithmetic in every kernel, fused or not, so results do not
    // depend on fusion or on the back end.
    let mut lowered = weft_ir::passes::math::lower_math(ir);
    lowered.name = name.to_string();
    let ir = ValidKernel::new(lowered)
        .map_err(|e| format!("internal error: math lowering made an invalid kernel: {e}"))?;
    Ok(KernelEntry::from_valid(content_id(&ir), ir))
}

/// The content id of a kernel: all 256 bits of its BLAKE3 hash.
fn content_id(ir: &Kernel) -> KernelId {
    let mut h = ContentHasher(blake3::Hasher::new());
    h.0.update(b"weft-kernel");
    ir.hash(&mut h);
    KernelId(*h.0.finalize().as_bytes())
}

/// A [`Hasher`] that feeds BLAKE3: deterministic across processes of one binary, unlike the
/// standard library's randomly seeded hasher. Only its feeding is used; the id is the whole
/// hash, not `finish`'s 64 bits.
struct ContentHasher(blake3::Hasher);

impl Hasher for ContentHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let bytes = self.0.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&bytes.as_bytes()[..8]);
        u64::from_le_bytes(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::scale_kernel as scale;

    #[test]
    fn ids_are_content_hashes() {
        let a = KernelEntry::new("p.scale", &scale("x", 2.0)).unwrap();
        let b = KernelEntry::new("p.scale", &scale("y", 2.0)).unwrap();
        let c = KernelEntry::new("p.scale", &scale("x", 3.0)).unwrap();
        let d = KernelEntry::new("q.scale", &scale("x", 2.0)).unwrap();
        assert_eq!(a.id(), b.id(), "same content, same name: same id");
        assert_ne!(a.id(), c.id(), "another constant");
        assert_ne!(a.id(), d.id(), "another name");
        assert_eq!(a.name(), "p.scale");
        // The whole hash names a kernel, not its first 64 bits.
        assert_ne!(a.id().0[8..], [0u8; 24]);
    }

    #[test]
    fn store_arguments_and_their_parameters_map_both_ways() {
        // Parameters: store, scalar, store.
        use weft_ir::DType;
        let mut k = weft_ir::KernelBuilder::new("p.axpy");
        let x = k.store(DType::F64, 1, weft_ir::Privilege::Read);
        let alpha = k.scalar(DType::F64);
        let out = k.store(DType::F64, 1, weft_ir::Privilege::Write);
        k.body().parallel(out, |b, i| {
            let v = b.load(x, i);
            let y = b.mul(v, alpha);
            b.store(out, i, y);
        });
        let e = KernelEntry::new("p.axpy", &k.finish()).unwrap();
        assert_eq!((e.store_param(0), e.store_param(1)), (Some(0), Some(2)));
        assert_eq!(e.store_param(2), None);
        assert_eq!((e.store_arg(0), e.store_arg(2)), (Some(0), Some(1)));
        assert_eq!((e.store_arg(1), e.store_arg(3)), (None, None));
    }

    #[test]
    fn the_same_kernel_needs_the_same_ir_not_only_the_same_id() {
        let a = KernelEntry::new("p.scale", &scale("x", 2.0)).unwrap();
        let b = KernelEntry::new("p.scale", &scale("x", 2.0)).unwrap();
        let c = KernelEntry::new("p.scale", &scale("x", 3.0)).unwrap();
        let forged = KernelEntry::with_forged_id(c.ir().kernel().clone(), a.id()).unwrap();
        assert!(a.same_kernel(&a) && a.same_kernel(&b));
        assert!(!a.same_kernel(&c));
        assert_eq!(forged.id(), a.id());
        assert!(
            !a.same_kernel(&forged),
            "one id, other IR: not the same kernel"
        );
    }

    #[test]
    fn plugin_kernels_are_validated_and_named() {
        let flat = weft_ir::flat::to_flat(&scale("whatever", 2.0));
        let entry = plugin_kernel("numeric", "scale", &flat).unwrap();
        assert_eq!(entry.name(), "numeric.scale");
        // A key the author began with the plugin's name keeps the name once.
        let entry = plugin_kernel("stats", "stats.mean.f64", &flat).unwrap();
        assert_eq!(entry.name(), "stats.mean.f64");
        assert_eq!(kernel_name("stats", "statsx.mean"), "stats.statsx.mean");
        let mut bad = flat.clone();
        bad.params.clear();
        let e = plugin_kernel("numeric", "scale", &bad).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidIr { plugin, key, .. } if plugin == "numeric" && key == "scale"),
            "{e}"
        );
    }
}
