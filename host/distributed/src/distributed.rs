//! [`Distributed`]: `weft-runtime`'s [`Distribution`] seam over a [`Comm`]. It keeps a
//! [`Holding`] per storage (none: every rank holds it), runs the plans of a task's reads
//! before it runs, records its writes after, merges reductions across ranks, and brings a
//! whole store to every rank before the application reads it.
//!
//! A rank holds a store as the pieces of it that its points use
//! ([`weft_runtime::stores::Storage::pieces`]): before each task, what each of this rank's
//! points uses is reserved, and pieces grow when later tasks use more. A store the application
//! writes, or that a task reduces into, is brought whole to every rank; one it reads is
//! gathered into a copy. Only the elements another rank wrote last move. Image reads take each
//! point's range from the source's rows its owner holds; reads through views that are not boxes
//! of their root bring the whole store.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use weft_ir::interp::{binary, reduce};
use weft_ir::reduction::LoopPartial;
use weft_ir::{BinaryOp, DType, Privilege, ReduceOp, Scalar};
use weft_runtime::backend::{Backend, BufferId};
use weft_runtime::distribution::{DistContext, Distribution, Traffic};
use weft_runtime::mapping::{BlockMapping, Mapping};
use weft_runtime::stores::{Piece, piece_holding};
use weft_runtime::{IndexTask, Partition, Rect, RootPartition, StorageId, ViewMap};

use crate::boxes::{BoxView, element_boxes};
use crate::comm::Comm;
use crate::plan::{ExchangePlan, Read, exchange, exchange_with};
use crate::transfer::{ByteAccess, Local, Slice, run_exchange};
use crate::{Error, Holding, Layer};

/// A storage's pieces through the back end, addressed in bytes of the whole storage.
struct BufferBytes<'a> {
    backend: &'a mut dyn Backend,
    pieces: Vec<Piece>,
    element: u64,
    len: u64,
}

impl BufferBytes<'_> {
    /// The buffer, and the offset in it, of storage bytes `at..at + n`.
    fn local(&self, at: u64, n: usize) -> Result<(BufferId, u64), Error> {
        let (lo, hi) = (at / self.element, (at + n as u64).div_ceil(self.element));
        piece_holding(&self.pieces, lo, hi)
            .and_then(|p| p.buffer.map(|b| (b, at - p.lo * self.element)))
            .ok_or_else(|| {
                Error::Transfer(format!(
                    "no piece this rank holds has elements {lo}..{hi} (it holds {:?})",
                    self.pieces.iter().map(|p| (p.lo, p.hi)).collect::<Vec<_>>()
                ))
            })
    }
}

impl ByteAccess for BufferBytes<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read(&mut self, at: u64, out: &mut [u8]) -> Result<(), Error> {
        let (buffer, at) = self.local(at, out.len())?;
        self.backend
            .read(buffer, at, out)
            .map_err(|e| Error::Transfer(e.to_string()))
    }

    fn write(&mut self, at: u64, data: &[u8]) -> Result<(), Error> {
        let (buffer, at) = self.local(at, data.len())?;
        self.backend
            .write(buffer, at, data)
            .map_err(|e| Error::Transfer(e.to_string()))
    }
}

/// The storage elements `lo..hi` that point `point` of a launch uses through `partition`
/// (none: `(0, 0)`); `read` reads an image's source (see [`RootPartition::sub_rect_with`]).
pub fn point_span(
    partition: &RootPartition,
    point: &[u64],
    read: impl FnMut(u64) -> Option<i64>,
) -> (u64, u64) {
    let rect = partition.sub_rect_with(point, read);
    if rect.volume() == 0 {
        return (0, 0);
    }
    let sub = ViewMap {
        offset: partition.view.element(&rect.origin),
        shape: rect.extent,
        strides: partition.view.strides.clone(),
    };
    sub.span().map_or((0, 0), |(lo, hi)| (lo, hi + 1))
}

/// The distribution of one program over the ranks of a [`Comm`].
pub struct Distributed {
    comm: Rc<dyn Comm>,
    mapping: BlockMapping,
    holdings: HashMap<StorageId, Holding>,
    /// Storages whose reductions were folded on every rank during the task that runs now.
    folded: HashSet<StorageId>,
    /// For exact sums and products that kernels reduce straight into a store: its bytes
    /// before the task, the same on every rank.
    reduce_base: HashMap<StorageId, Vec<u8>>,
    traffic: Traffic,
    /// Whether every task's plan is compared across ranks (`WEFT_CHECK_REPLICATION=1`).
    check: bool,
    /// Tasks run so far (the checks name the first that differs).
    tasks: u64,
    /// Plans derived so far, by what they derive from: a loop that runs the same tasks over
    /// the same holdings reuses them (cleared when it holds [`PLAN_CACHE`] of them).
    plans: HashMap<PlanKey, ExchangePlan>,
    /// How many times each storage was written (by a task or the application): the plans of
    /// images key on their source's version.
    versions: HashMap<StorageId, u64>,
}

/// The most message plans kept for reuse.
const PLAN_CACHE: usize = 1024;

/// A layer as a plan key sees it: its partition, launch and given boxes.
type LayerKey = (
    RootPartition,
    Vec<u64>,
    Option<Vec<Vec<weft_runtime::Rect>>>,
);

/// What a plan derives from: the read partition, its launch, the root's shape, and the
/// holding's layers. Equal keys give equal plans on a rank.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlanKey {
    partition: RootPartition,
    launch: Vec<u64>,
    root: Vec<u64>,
    layers: Vec<LayerKey>,
    /// For an image read: its source's version.
    source: Option<u64>,
}

impl PlanKey {
    fn of(read: &Read<'_>) -> PlanKey {
        PlanKey {
            partition: read.partition.clone(),
            launch: read.launch.to_vec(),
            root: read.root.to_vec(),
            layers: read
                .holding
                .layers
                .iter()
                .map(|l| (l.partition.clone(), l.launch.clone(), l.explicit.clone()))
                .collect(),
            source: None,
        }
    }
}

impl std::fmt::Debug for Distributed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Distributed(rank {} of {})",
            self.comm.rank(),
            self.comm.size()
        )
    }
}

fn runtime_error(e: Error) -> weft_runtime::Error {
    weft_runtime::Error::Usage(e.to_string())
}

impl Distributed {
    /// The distribution over `comm`'s ranks, under the block mapping.
    pub fn new(comm: Rc<dyn Comm>) -> Distributed {
        Distributed::with_check(comm, false)
    }

    /// [`Distributed::new`], comparing before every task, when `check` is set, a hash of what
    /// the task's messages derive from (the fused task: its kernel id, launch, scalars and
    /// arguments with their partitions, and where the latest values of what it reads are)
    /// across ranks: control replication makes them equal, and a difference stops the job
    /// naming the first task that differs.
    pub fn with_check(comm: Rc<dyn Comm>, check: bool) -> Distributed {
        let ranks = comm.size();
        Distributed {
            comm,
            mapping: BlockMapping { ranks },
            holdings: HashMap::new(),
            folded: HashSet::new(),
            reduce_base: HashMap::new(),
            traffic: Traffic::default(),
            check,
            tasks: 0,
            plans: HashMap::new(),
            versions: HashMap::new(),
        }
    }

    /// Ends the whole job (every rank) after an error on this one.
    pub fn abort(&self, code: i32) -> ! {
        self.comm.abort(code)
    }

    /// Runs `plan` on `storage`'s buffer.
    fn run(
        &mut self,
        cx: &mut DistContext<'_>,
        storage: StorageId,
        plan: &ExchangePlan,
    ) -> weft_runtime::Result<()> {
        if plan.recvs.is_empty() && plan.sends.is_empty() {
            return Ok(());
        }
        let (root, element) = match cx.stores.storage(storage) {
            Some(s) => (s.shape.clone(), s.dtype.size()),
            None => return Ok(()),
        };
        cx.stores.ensure_allocated(storage, cx.backend, false)?;
        let pieces = cx
            .stores
            .storage(storage)
            .map(|s| s.pieces().to_vec())
            .unwrap_or_default();
        let len = root.iter().product::<u64>() * element as u64;
        let mut bytes = BufferBytes {
            backend: cx.backend,
            pieces,
            element: element as u64,
            len,
        };
        let sent = run_exchange(
            self.comm.as_ref(),
            plan,
            &mut Local {
                bytes: &mut bytes,
                root: &root,
                element,
            },
        )
        .map_err(runtime_error)?;
        self.traffic.bytes += sent;
        self.traffic.messages += plan.sends.len() as u64;
        Ok(())
    }

    /// Brings every element of `storage` to this rank; it is then held everywhere.
    fn gather_all(
        &mut self,
        cx: &mut DistContext<'_>,
        storage: StorageId,
    ) -> weft_runtime::Result<()> {
        let Some(len) = cx.stores.storage(storage).map(|s| s.len()) else {
            return Ok(());
        };
        cx.stores.reserve(storage, 0, len, cx.backend)?;
        let Some(holding) = self.holdings.get(&storage).filter(|h| !h.layers.is_empty()) else {
            return Ok(());
        };
        let Some(root) = cx.stores.storage(storage).map(|s| s.shape.clone()) else {
            return Ok(());
        };
        let plan = self.gather_plan(&root, holding.clone())?;
        self.run(cx, storage, &plan)?;
        self.holdings.remove(&storage);
        Ok(())
    }
}

impl Distributed {
    /// The plan that brings every element of a store of shape `root`, held as `holding`
    /// says, to every rank: one point per rank, each reading the whole store.
    fn gather_plan(
        &mut self,
        root: &[u64],
        holding: Holding,
    ) -> weft_runtime::Result<ExchangePlan> {
        let whole = RootPartition::fold(&Partition::None, &ViewMap::whole(root));
        let launch = [self.comm.size() as u64];
        let read = Read {
            partition: &whole,
            launch: &launch,
            root,
            holding: &holding,
        };
        let rank = self.comm.rank();
        cached_plan(
            &mut self.plans,
            &mut self.traffic,
            &self.mapping,
            rank,
            read,
            None,
        )
        .map_err(runtime_error)
    }
}

/// How an image read's points' boxes are found: the version of its source, and the function
/// that reads them from it.
type GivenReader<'c, 'a> = (
    u64,
    &'c mut DistContext<'a>,
    &'c dyn Fn(&mut DistContext<'_>) -> Result<(Layer, u64), Error>,
);

/// The plan of `read` for `rank`: reused from `plans` when the same partitions and holdings
/// (and, for an image, the same version of its source) were planned before, derived
/// otherwise; counted in `traffic`.
fn cached_plan(
    plans: &mut HashMap<PlanKey, ExchangePlan>,
    traffic: &mut Traffic,
    mapping: &BlockMapping,
    rank: usize,
    read: Read<'_>,
    given: Option<GivenReader<'_, '_>>,
) -> Result<ExchangePlan, Error> {
    let mut key = PlanKey::of(&read);
    key.source = given.as_ref().map(|g| g.0);
    if let Some(plan) = plans.get(&key) {
        traffic.plans_reused += 1;
        return Ok(plan.clone());
    }
    let plan = match given {
        Some((_, cx, boxes)) => {
            let (layer, sent) = boxes(cx)?;
            traffic.bytes += sent;
            traffic.messages += 1;
            exchange_with(read, layer, rank, mapping)?
        }
        None => exchange(read, rank, mapping)?,
    };
    traffic.plans_derived += 1;
    if plans.len() >= PLAN_CACHE {
        plans.clear();
    }
    plans.insert(key, plan.clone());
    Ok(plan)
}

/// The layer of the root boxes every point of a launch over `launch` reaches through
/// `part` (into a root of shape `root`), with the bytes this rank sent to learn them: through
/// an image, each point's range, read from the source's rows by the point's owner (the only
/// rank that holds them) and all-gathered; through a view that is not a box of its root, each
/// point's elements, as runs, found here.
fn given_layer(
    cx: &mut DistContext<'_>,
    part: &RootPartition,
    launch: &[u64],
    root: &[u64],
    comm: &dyn Comm,
    mapping: &BlockMapping,
) -> Result<(Layer, u64), Error> {
    let boxed = BoxView::of(&part.view, root);
    let boxes_of = |cx: &mut DistContext<'_>, p: &[u64]| {
        let source = part.image.as_deref().map(|i| i.source);
        let sub = part.sub_rect_with(p, |element| {
            source
                .and_then(|s| weft_runtime::executor::read_index(cx.stores, cx.backend, s, element))
        });
        match &boxed {
            Some(v) => vec![v.root_box(&sub)],
            None => element_boxes(&part.view, &sub, root),
        }
    };
    let linear = |p: &[u64]| p.iter().zip(launch).fold(0u64, |acc, (&i, &e)| acc * e + i) as usize;
    let count = launch.iter().product::<u64>() as usize;
    let mut boxes = vec![Vec::new(); count];
    if part.image.is_none() {
        for p in weft_runtime::partition::points(launch) {
            boxes[linear(&p)] = boxes_of(cx, &p);
        }
        return Ok((Layer::given(part, launch, root, boxes)?, 0));
    }
    // This rank's points' boxes, as words: the number of points (never an empty message),
    // then per point the number of boxes and each box's origin and extent.
    let own = mapping.points_of(comm.rank(), launch);
    let mut words: Vec<u64> = vec![own.len() as u64];
    for p in own {
        let mine = boxes_of(cx, &p);
        words.push(mine.len() as u64);
        for b in &mine {
            words.extend(&b.origin);
            words.extend(&b.extent);
        }
    }
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let all = comm.all_gather(&bytes)?;
    let dims = root.len();
    for (rank, b) in all.iter().enumerate() {
        let bad = || Error::Transfer(format!("rank {rank} sent point ranges that do not decode"));
        let words: Vec<u64> = b
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        let theirs = mapping.points_of(rank, launch);
        let (&n, mut rest) = words.split_first().ok_or_else(bad)?;
        if n != theirs.len() as u64 {
            return Err(bad());
        }
        for p in theirs {
            let (&n, tail) = rest.split_first().ok_or_else(bad)?;
            rest = tail;
            let mut mine = Vec::new();
            for _ in 0..n {
                if rest.len() < 2 * dims {
                    return Err(bad());
                }
                mine.push(Rect {
                    origin: rest[..dims].to_vec().into(),
                    extent: rest[dims..2 * dims].to_vec().into(),
                });
                rest = &rest[2 * dims..];
            }
            boxes[linear(&p)] = mine;
        }
    }
    let sent = bytes.len() as u64 * (comm.size() as u64).saturating_sub(1);
    Ok((Layer::given(part, launch, root, boxes)?, sent))
}

/// A storage's whole buffer, read.
fn read_whole(
    cx: &mut DistContext<'_>,
    storage: StorageId,
) -> weft_runtime::Result<(Vec<u8>, DType)> {
    let Some((len, dtype)) = cx.stores.storage(storage).map(|s| (s.bytes(), s.dtype)) else {
        return Ok((Vec::new(), DType::F64));
    };
    let elements = len / dtype.size() as u64;
    cx.stores.reserve(storage, 0, elements, cx.backend)?;
    let buffer = cx.stores.ensure_buffer(storage, cx.backend)?;
    let mut out = vec![0u8; len as usize];
    cx.backend.read(buffer, 0, &mut out)?;
    Ok((out, dtype))
}

/// Combines every rank's copy of a store that `op` reduced into, element by element: the
/// idempotent operators (`min`, `max`, and every `bool` one) fold the copies; exact sums add
/// each copy's change from `base`, the bytes before the task.
fn combine(
    op: ReduceOp,
    dtype: DType,
    copies: &[Vec<u8>],
    base: Option<&[u8]>,
) -> Result<Vec<u8>, String> {
    let size = dtype.size();
    let len = copies.first().map_or(0, Vec::len);
    if copies.iter().any(|c| c.len() != len) {
        return Err("ranks hold copies of different sizes".into());
    }
    let scalar = |b: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w[..size].copy_from_slice(&b[at..at + size]);
        Scalar::from_bits(dtype, u64::from_le_bytes(w))
    };
    let idempotent = matches!(op, ReduceOp::Min | ReduceOp::Max) || dtype == DType::Bool;
    let mut out = vec![0u8; len];
    for at in (0..len).step_by(size.max(1)) {
        let value = if idempotent {
            let mut acc = scalar(&copies[0], at);
            for c in &copies[1..] {
                acc = reduce(op, acc, scalar(c, at)).ok_or("an operator without a fold")?;
            }
            acc
        } else if op == ReduceOp::Sum && matches!(dtype, DType::I32 | DType::I64) {
            let base = base.ok_or("no copy from before the task")?;
            let b = scalar(base, at);
            let mut acc = b;
            for c in copies {
                let delta = binary(BinaryOp::Sub, scalar(c, at), b).ok_or("no difference")?;
                acc = binary(BinaryOp::Add, acc, delta).ok_or("no sum")?;
            }
            acc
        } else {
            return Err(format!(
                "{op:?} of {dtype} into a store the kernel reduces into directly"
            ));
        };
        out[at..at + size].copy_from_slice(&value.to_bits().to_le_bytes()[..size]);
    }
    Ok(out)
}

impl Distributed {
    /// The hash of what `task`'s messages derive from (see [`Distributed::with_check`]).
    fn plan_hash(&self, task: &IndexTask) -> u64 {
        use std::hash::{Hash, Hasher};
        // SipHash with fixed keys: the same on every rank.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        task.kernel.id().hash(&mut h);
        task.launch.hash(&mut h);
        for v in &task.scalars {
            v.to_bits().hash(&mut h);
        }
        for arg in &task.args {
            (arg.storage, arg.local, arg.deferred).hash(&mut h);
            format!("{:?}", arg.privilege).hash(&mut h);
            arg.root_partition.hash(&mut h);
            if let Some(holding) = self.holdings.get(&arg.storage) {
                for layer in &holding.layers {
                    (&layer.partition, &layer.launch, &layer.explicit).hash(&mut h);
                }
            }
        }
        h.finish()
    }

    /// Compares `task`'s plan hash across ranks; an error naming the task where they differ.
    fn check_replicated(&mut self, task: &IndexTask) -> weft_runtime::Result<()> {
        let mine = self.plan_hash(task);
        let all = self
            .comm
            .all_gather(&mine.to_le_bytes())
            .map_err(runtime_error)?;
        self.traffic.messages += 1;
        let hashes: Vec<Option<u64>> = all
            .iter()
            .map(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
            .collect();
        if let Some(r) = hashes.iter().position(|h| *h != hashes[0]) {
            return Err(weft_runtime::Error::Usage(format!(
                "replicated control differs across ranks at task {} (`{}` on this rank, rank {}): \
                 rank {r}'s plan is not rank 0's (WEFT_CHECK_REPLICATION)",
                self.tasks,
                task.kernel.name(),
                self.comm.rank()
            )));
        }
        Ok(())
    }
}

impl Distributed {
    /// Reserves, for each of this rank's `points` of `task`, what it uses of each argument
    /// through an image (`images`) or through any other partition.
    fn reserve(
        &mut self,
        cx: &mut DistContext<'_>,
        task: &IndexTask,
        points: &[Vec<u64>],
        images: bool,
    ) -> weft_runtime::Result<()> {
        for arg in task.args.iter().filter(|a| !a.local) {
            let source = arg.root_partition.image.as_deref().map(|i| i.source);
            if source.is_some() != images {
                continue;
            }
            for p in points {
                let (lo, hi) = {
                    let (stores, backend) = (&*cx.stores, &mut *cx.backend);
                    point_span(&arg.root_partition, p, |element| {
                        source.and_then(|s| {
                            weft_runtime::executor::read_index(stores, backend, s, element)
                        })
                    })
                };
                cx.stores.reserve(arg.storage, lo, hi, cx.backend)?;
            }
        }
        Ok(())
    }

    /// Brings here what this rank's points of `task` read of argument `a` and other ranks
    /// wrote last.
    fn fetch(
        &mut self,
        cx: &mut DistContext<'_>,
        task: &IndexTask,
        a: usize,
    ) -> weft_runtime::Result<()> {
        let kernel = &task.kernel;
        let Some(arg) = task.args.get(a).filter(|arg| !arg.local) else {
            return Ok(());
        };
        // A store the task only writes needs nothing first when its points overwrite their
        // whole tiles; otherwise what they leave must be current too.
        let overwritten = matches!(arg.privilege, Privilege::Write)
            && kernel
                .store_param(a)
                .and_then(|p| kernel.overwritten_by(p))
                .is_some();
        if overwritten {
            return Ok(());
        }
        let Some(holding) = self
            .holdings
            .get(&arg.storage)
            .filter(|h| !h.layers.is_empty())
        else {
            return Ok(());
        };
        let Some(root) = cx.stores.storage(arg.storage).map(|s| s.shape.clone()) else {
            return Ok(());
        };
        // A store reduced into ends up the same on every rank (its reductions are folded, or
        // combined, everywhere, into every element): every rank needs all of it first.
        let reduced = matches!(arg.privilege, Privilege::Reduce(_));
        let read = Read {
            partition: &arg.root_partition,
            launch: &task.launch,
            root: &root,
            holding,
        };
        let rank = self.comm.rank();
        // Through an image, each point's range comes from the source's rows, which only the
        // point's owner holds: the ranks exchange their points' ranges when the plan is
        // derived, and the plan is kept under the source's version (how often it changed).
        let version = arg
            .root_partition
            .image
            .as_deref()
            .map(|image| self.versions.get(&image.source).copied().unwrap_or(0));
        let (partition, launch, root) = (&arg.root_partition, &task.launch, &root);
        let (comm, mapping) = (self.comm.clone(), self.mapping);
        let given = |cx: &mut DistContext<'_>| {
            given_layer(cx, partition, launch, root, comm.as_ref(), &mapping)
        };
        let planned = if reduced {
            None
        } else {
            cached_plan(
                &mut self.plans,
                &mut self.traffic,
                &self.mapping,
                rank,
                read,
                version.map(|v| (v, &mut *cx, &given as &dyn Fn(&mut DistContext<'_>) -> _)),
            )
            .ok()
        };
        match planned {
            Some(plan) => self.run(cx, arg.storage, &plan),
            None => self.gather_all(cx, arg.storage),
        }
    }
}

impl Distribution for Distributed {
    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn ranks(&self) -> usize {
        self.comm.size()
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }

    fn before_task(
        &mut self,
        cx: &mut DistContext<'_>,
        task: &IndexTask,
    ) -> weft_runtime::Result<()> {
        self.folded.clear();
        self.tasks += 1;
        // Storages are never reused, so a gone one's holding only takes memory: drop them
        // now and then.
        if self.tasks.is_multiple_of(256) {
            self.holdings
                .retain(|id, _| cx.stores.storage(*id).is_some());
            self.versions
                .retain(|id, _| cx.stores.storage(*id).is_some());
        }
        if self.check {
            self.check_replicated(task)?;
        }
        // This rank must hold what each of its points uses, before anything lands there
        // (reserved first, so that a storage that two arguments name grows once). An image's
        // ranges come from its source's rows, which this rank's points read through the
        // source's own argument: those are brought here first.
        let points = self.mapping.points_of(self.comm.rank(), &task.launch);
        let sources: HashSet<StorageId> = task
            .args
            .iter()
            .filter_map(|a| a.root_partition.image.as_deref().map(|i| i.source))
            .collect();
        self.reserve(cx, task, &points, false)?;
        let mut fetched = vec![false; task.args.len()];
        for (a, arg) in task.args.iter().enumerate() {
            if !arg.local && sources.contains(&arg.storage) && arg.root_partition.image.is_none() {
                self.fetch(cx, task, a)?;
                fetched[a] = true;
            }
        }
        self.reserve(cx, task, &points, true)?;
        for (a, done) in fetched.into_iter().enumerate() {
            if !done {
                self.fetch(cx, task, a)?;
            }
        }
        self.reduce_base.clear();
        for arg in &task.args {
            if let Privilege::Reduce(ReduceOp::Sum | ReduceOp::Prod) = arg.privilege
                && !arg.local
            {
                let (bytes, _) = read_whole(cx, arg.storage)?;
                self.reduce_base.insert(arg.storage, bytes);
            }
        }
        Ok(())
    }

    fn after_task(
        &mut self,
        cx: &mut DistContext<'_>,
        task: &IndexTask,
    ) -> weft_runtime::Result<()> {
        for arg in task
            .args
            .iter()
            .filter(|a| !a.local && a.privilege.mutates())
        {
            *self.versions.entry(arg.storage).or_default() += 1;
        }
        for arg in &task.args {
            if arg.local || !arg.privilege.mutates() || self.folded.contains(&arg.storage) {
                continue;
            }
            let Some(root) = cx.stores.storage(arg.storage).map(|s| s.shape.clone()) else {
                continue;
            };
            if let Privilege::Reduce(op) = arg.privilege {
                // Reduced straight into the store (exact operators): every rank's copy holds
                // its points' part; combine them on every rank.
                let (local, dtype) = read_whole(cx, arg.storage)?;
                let copies = self.comm.all_gather(&local).map_err(runtime_error)?;
                self.traffic.bytes += local.len() as u64 * (self.comm.size() as u64 - 1);
                self.traffic.messages += 1;
                let base = self.reduce_base.get(&arg.storage).map(Vec::as_slice);
                let merged = combine(op, dtype, &copies, base).map_err(|m| {
                    weft_runtime::Error::Usage(format!(
                        "kernel `{}` on several ranks: {m}",
                        task.kernel.name()
                    ))
                })?;
                let buffer = cx.stores.ensure_buffer(arg.storage, cx.backend)?;
                cx.backend.write(buffer, 0, &merged)?;
                self.holdings.remove(&arg.storage);
                continue;
            }
            match Layer::new(&arg.root_partition, &task.launch, &root) {
                Ok(layer) => self
                    .holdings
                    .entry(arg.storage)
                    .or_default()
                    .write(layer, &root),
                Err(_) => {
                    // Through an image (each point's range, read from the source's rows by the
                    // point's owner and all-gathered) or a view that is not a box of its root
                    // (each point's elements, as runs).
                    let (layer, sent) = given_layer(
                        cx,
                        &arg.root_partition,
                        &task.launch,
                        &root,
                        self.comm.as_ref(),
                        &self.mapping,
                    )
                    .map_err(runtime_error)?;
                    self.traffic.bytes += sent;
                    self.traffic.messages += u64::from(arg.root_partition.image.is_some());
                    self.holdings
                        .entry(arg.storage)
                        .or_default()
                        .write(layer, &root);
                }
            }
        }
        Ok(())
    }

    fn gather_partials(
        &mut self,
        held: Vec<LoopPartial>,
    ) -> weft_runtime::Result<Vec<LoopPartial>> {
        let mut words = vec![held.len() as u64];
        for p in &held {
            words.extend(p.to_words());
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let all = self.comm.all_gather(&bytes).map_err(runtime_error)?;
        self.traffic.bytes += bytes.len() as u64 * (self.comm.size() as u64 - 1);
        self.traffic.messages += 1;
        let mut out = Vec::new();
        for (rank, b) in all.iter().enumerate() {
            let words: Vec<u64> = b
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            let bad = || {
                weft_runtime::Error::Internal(format!(
                    "rank {rank} sent partial results that do not decode"
                ))
            };
            let (&n, mut rest) = words.split_first().ok_or_else(bad)?;
            for _ in 0..n {
                let (p, r) = LoopPartial::from_words(rest).ok_or_else(bad)?;
                out.push(p);
                rest = r;
            }
        }
        Ok(out)
    }

    fn replicated(&mut self, storage: StorageId) {
        self.holdings.remove(&storage);
        self.folded.insert(storage);
    }

    fn before_write(
        &mut self,
        cx: &mut DistContext<'_>,
        storage: StorageId,
    ) -> weft_runtime::Result<()> {
        *self.versions.entry(storage).or_default() += 1;
        self.gather_all(cx, storage)
    }

    fn gather(
        &mut self,
        cx: &mut DistContext<'_>,
        storage: StorageId,
    ) -> weft_runtime::Result<Vec<u8>> {
        let Some((root, element, pieces)) = cx
            .stores
            .storage(storage)
            .map(|s| (s.shape.clone(), s.dtype.size(), s.pieces().to_vec()))
        else {
            return Ok(Vec::new());
        };
        // What this rank holds, at its place; zeros elsewhere (a rank holds pieces of a store
        // only while what lies outside them is zeros or another rank's).
        let size = element as u64;
        let mut whole = vec![0u8; (root.iter().product::<u64>() * size) as usize];
        for p in pieces {
            if let Some(buffer) = p.buffer {
                let at = (p.lo * size) as usize..(p.hi * size) as usize;
                cx.backend.read(buffer, 0, &mut whole[at])?;
            }
        }
        let Some(holding) = self.holdings.get(&storage).filter(|h| !h.layers.is_empty()) else {
            return Ok(whole);
        };
        let plan = self.gather_plan(&root, holding.clone())?;
        if !plan.recvs.is_empty() || !plan.sends.is_empty() {
            let sent = run_exchange(
                self.comm.as_ref(),
                &plan,
                &mut Local {
                    bytes: &mut Slice(&mut whole),
                    root: &root,
                    element,
                },
            )
            .map_err(runtime_error)?;
            self.traffic.bytes += sent;
            self.traffic.messages += plan.sends.len() as u64;
        }
        Ok(whole)
    }

    fn fail(&self, error: &weft_runtime::Error) {
        use std::io::Write;
        if self.comm.stop(&error.to_string()) {
            return;
        }
        // One write, so that `mpirun`'s own messages cannot cut the line.
        let line = format!(
            "weft: rank {} of {} failed, ending the job: {error}\n",
            self.comm.rank(),
            self.comm.size()
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
        self.comm.abort(3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_i64(v: &[i64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn copies_combine_as_one_process_would_reduce() {
        // max: fold the copies.
        let copies = vec![bytes_i64(&[3, -1]), bytes_i64(&[2, 7]), bytes_i64(&[3, 0])];
        let got = combine(ReduceOp::Max, DType::I64, &copies, None).unwrap();
        assert_eq!(got, bytes_i64(&[3, 7]));
        // An integer sum: the base plus every copy's change (wrapping).
        let base = bytes_i64(&[10, i64::MAX]);
        let copies = vec![bytes_i64(&[12, i64::MAX]), bytes_i64(&[9, i64::MIN])];
        let got = combine(ReduceOp::Sum, DType::I64, &copies, Some(&base)).unwrap();
        assert_eq!(got, bytes_i64(&[11, i64::MIN]));
        // Float sums go through the canonical tree, never here.
        let f = vec![1.0f64.to_le_bytes().to_vec()];
        assert!(combine(ReduceOp::Sum, DType::F64, &f, Some(&f[0])).is_err());
        // Copies of different sizes are an error.
        assert!(combine(ReduceOp::Min, DType::I64, &[vec![0; 8], vec![0; 16]], None).is_err());
    }
}
