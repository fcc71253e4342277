//! A multi: its ops run in order under one transaction, all or nothing.

use std::collections::HashSet;

use zklock_proto::{code, create_mode, op, CreateRequest, MultiOp, OpResult};

use super::ops::{Caller, Txn};
use super::{err, Model};

impl Model {
    /// All or nothing: the ops run in order on the tree, and the first failure rolls them all
    /// back. Results: 0 for the ops before the failure, its code, RuntimeInconsistency after.
    pub(super) fn multi(
        &mut self,
        caller: &Caller,
        ops: Vec<MultiOp>,
        txn: &mut Txn,
    ) -> Result<Vec<OpResult>, i32> {
        if ops
            .iter()
            .any(|o| matches!(o, MultiOp::GetData(_) | MultiOp::GetChildren(_)))
        {
            // ZooKeeper's prep fails on a read in a multi with a marshalling error.
            return err(code::MARSHALLING_ERROR);
        }
        // Its MultiOperationRecord refuses a create with unknown flags the same way.
        if ops.iter().any(|o| match o {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => {
                !(create_mode::PERSISTENT..=create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL)
                    .contains(&r.flags)
            }
            _ => false,
        }) {
            return err(code::MARSHALLING_ERROR);
        }
        txn.undo = Some((Vec::new(), HashSet::new()));
        let mut results = Vec::with_capacity(ops.len());
        let mut failed = None;
        for (i, o) in ops.iter().enumerate() {
            let r = match o {
                MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => {
                    // ZooKeeper's Op.Create takes its op code from the mode when the mode is
                    // TTL or container, whatever the op said.
                    let opc = match r.flags {
                        create_mode::PERSISTENT_WITH_TTL
                        | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL => op::CREATE_TTL,
                        create_mode::CONTAINER => op::CREATE_CONTAINER,
                        _ => o.op(),
                    };
                    self.create(caller, opc, r, -1, txn).map(|(p, s)| {
                        if opc == op::CREATE {
                            OpResult::Create(p)
                        } else {
                            OpResult::Create2(p, s)
                        }
                    })
                }
                MultiOp::CreateTtl(r) => {
                    let c = CreateRequest {
                        path: r.path.clone(),
                        data: r.data.clone(),
                        acl: r.acl.clone(),
                        flags: r.flags,
                    };
                    // Without a TTL mode, ZooKeeper's Op.create makes it a plain create (or a
                    // container's) and forgets the TTL.
                    let (opc, ttl) = match r.flags {
                        create_mode::PERSISTENT_WITH_TTL
                        | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL => (op::CREATE_TTL, r.ttl),
                        create_mode::CONTAINER => (op::CREATE_CONTAINER, -1),
                        _ => (op::CREATE, -1),
                    };
                    self.create(caller, opc, &c, ttl, txn).map(|(p, s)| {
                        if opc == op::CREATE {
                            OpResult::Create(p)
                        } else {
                            OpResult::Create2(p, s)
                        }
                    })
                }
                MultiOp::Delete(r) => self
                    .delete(caller, &r.path, r.version, txn)
                    .map(|()| OpResult::Delete),
                MultiOp::SetData(r) => self
                    .set_data(caller, &r.path, r.data.clone(), r.version, txn)
                    .map(OpResult::SetData),
                MultiOp::Check(r) => self
                    .check(caller, &r.path, r.version)
                    .map(|_| OpResult::Check),
                MultiOp::GetChildren(_) | MultiOp::GetData(_) => err(code::MARSHALLING_ERROR),
            };
            match r {
                Ok(res) => results.push(res),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let Some((at, e)) = failed else {
            txn.undo = None;
            return Ok(results);
        };
        if let Some((undo, _)) = txn.undo.take() {
            for (path, prior) in undo.into_iter().rev() {
                self.tree.restore(&path, prior);
            }
        }
        txn.changes.clear();
        Ok((0..ops.len())
            .map(|i| {
                OpResult::Error(match i.cmp(&at) {
                    std::cmp::Ordering::Less => 0,
                    std::cmp::Ordering::Equal => e,
                    std::cmp::Ordering::Greater => code::RUNTIME_INCONSISTENCY,
                })
            })
            .collect())
    }
}
