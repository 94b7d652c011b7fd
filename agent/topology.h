/* topology.h -- the node's tessera.io/gpus annotation as the node agent writes it (README, "The tessera.io/gpus
 * node annotation").
 *
 * One object per GPU in NVML index order, the keys the agent owns first:
 *   {"index":0,"uuid":"GPU-...","pci":"00000000:07:00.0","numa":0,"nvlink":[1,...],"topo":["X","NV12",...]}
 *   - pci   nvmlPciInfo_t.busId as NVML gives it;
 *   - numa  <sysfs root>/bus/pci/devices/<bus id, lower case, 4-digit domain>/numa_node; omitted when the file
 *           is missing or says -1 (a single-socket machine, or firmware that does not tell);
 *   - topo  topo[j] the link to GPU j as `nvidia-smi topo -m` names it: "X" itself, "NV<n>" with n NVLinks
 *           (straight links counted per peer; two GPUs that both reach NVSwitches are on one switch fabric and
 *           get NV<the smaller of their switch link counts>, as nvidia-smi shows on a DGX), else the PCIe level
 *           "PIX" | "PXB" | "PHB" | "NODE" | "SYS";
 *   - nvlink the indices j whose topo[j] is NV<n> (ascending; [] when none), so it agrees with topo.
 * Every other key of the node's existing entry for the same GPU (matched by uuid; an entry without uuid by its
 * position) is kept as it is, after the owned keys and in its order: mig, mig_dynamic, memory_mib, product are
 * the operator's (or GFD's). Entries for GPUs NVML no longer reports are dropped.
 *
 * Refused (NULL with err, nothing is written): the existing value is not a JSON array of objects (an operator's
 * data is never overwritten blindly); a MIG-enabled GPU whose entry has no "mig" (README: a MIG GPU must carry
 * it, and this agent does not enumerate MIG instances from NVML, so it cannot supply it).
 */
#ifndef AGENT_TOPOLOGY_H
#define AGENT_TOPOLOGY_H

#include <stddef.h>

#include "agent/nvml.h"

#define AGENT_ANN_GPUS "tessera.io/gpus"

/* The NUMA node of the PCI device NVML names bus_id ("00000000:07:00.0"), from sysfs; -1 when unknown. */
int agent_sysfs_numa(const char *sysfs_root, const char *bus_id);

/* The annotation's value (compact JSON, malloc'd; deterministic, so an unchanged node gives the same bytes),
 * merged with existing (the node's current value, NULL or "" when it has none). NULL with err when refused. */
char *agent_topology_json(const agent_gpus *g, const char *sysfs_root, const char *existing, char *err,
                          size_t errlen);

#endif
