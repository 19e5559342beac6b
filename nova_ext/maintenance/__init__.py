# SPDX-License-Identifier: Apache-2.0
"""Day 2 for spread groups: audit, repair plans, host drains.

What runs when an operator types

* ``nova-ext-manage spread audit`` -- :mod:`.audit` reads the cloud (Nova's
  databases through nova.conf, placement through ``[placement]``) into
  plain data, and :mod:`.judge` says, with the scheduler's own constraint
  arithmetic, whether each server group's spread constraints hold where
  its members run now; :mod:`.report` writes it as a table, JSON or
  Prometheus text;
* ``spread audit --plan`` / ``spread rebalance [--execute]`` -- :mod:`.plan`
  turns that state into moves that restore the constraints, each step
  judged again;
* ``nova-ext-manage host drain`` -- :mod:`.drain` marks the hosts in
  maintenance, plans their servers' moves and has :mod:`.execute` run them
  through Nova's REST API (:mod:`.compute_api`, openstacksdk), within the
  per-group budget, with progress and a clean stop on a signal.

Where hosts are is the scheduler's business (:mod:`.domains`, the one
module that asks ``nova_ext.scheduler.failure_domains``). The operator's
page: doc/source/maintenance.rst.
"""
