// Offline checks of deploy/*.yaml (no cluster): node deploy/check/check.mjs [manifest...]
// - core kinds (Service, Job, and the Job and pod templates inside the controllers' kinds) are validated
//   against Kubernetes' own schemas (kubernetes-models: types and required fields);
// - the controllers' kinds (JobSet, LeaderWorkerSet, PyTorchJob) have no schema here: they must parse and
//   carry what jcomm's mapping of their variables needs (io.jcomm.api.launch.Launchers).
// Prints one line per manifest; exits 1 on the first list of problems.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as yaml from "js-yaml";
import { Service, Pod } from "kubernetes-models/v1";
import { Job } from "kubernetes-models/batch/v1";

const here = path.dirname(fileURLToPath(import.meta.url));
const files = process.argv.length > 2 ? process.argv.slice(2)
  : fs.readdirSync(path.join(here, "..")).filter(f => f.endsWith(".yaml")).sort().map(f => path.join(here, "..", f));

let failed = false;
for (const file of files) {
  const problems = [];
  const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter(d => d != null);
  const kinds = [];
  for (const d of docs) {
    kinds.push(d.kind);
    try {
      check(d, problems);
    } catch (e) {
      problems.push(`${d.kind}/${d.metadata?.name}: ${e.message}`);
    }
  }
  if (problems.length) {
    failed = true;
    console.log(`FAIL ${path.basename(file)}:\n  ${problems.join("\n  ")}`);
  } else {
    console.log(`ok   ${path.basename(file)}: ${kinds.join(", ")}`);
  }
}
process.exit(failed ? 1 : 0);

function check(d, problems) {
  const need = (ok, what) => { if (!ok) problems.push(`${d.kind}/${d.metadata?.name}: ${what}`); };
  const valid = (model, what) => {
    try { model.validate(); } catch (e) { problems.push(`${d.kind}/${d.metadata?.name} ${what}: ${e.message}`); }
  };
  const podOf = (template, what) => valid(new Pod({ metadata: { name: "p" }, spec: template?.spec }), what);
  const jobOf = (spec, what) => valid(new Job({ metadata: { name: "j" }, spec }), what);
  const env = (container) => Object.fromEntries((container?.env ?? []).map(e => [e.name, e]));
  switch (`${d.apiVersion} ${d.kind}`) {
    case "v1 Service":
      valid(new Service(d), "schema");
      need(d.spec?.clusterIP === "None", "must be headless (clusterIP: None): pods need their own DNS names");
      need(d.spec?.publishNotReadyAddresses === true, "publishNotReadyAddresses: true (pods meet before they are Ready)");
      break;
    case "batch/v1 Job": {
      valid(new Job(d), "schema");
      const s = d.spec;
      need(s.completionMode === "Indexed", "completionMode: Indexed (the rank is JOB_COMPLETION_INDEX)");
      need(s.parallelism === s.completions, "parallelism must equal completions (every rank runs at once)");
      const e = env(s.template.spec.containers[0]);
      need(Number(e.WORLD_SIZE?.value) === s.completions, "WORLD_SIZE must be the completions");
      need(e.MASTER_ADDR?.value === `${d.metadata.name}-0.${s.template.spec.subdomain}`,
        `MASTER_ADDR must be pod 0's name ${d.metadata.name}-0.<subdomain>`);
      break;
    }
    case "jobset.x-k8s.io/v1alpha2 JobSet": {
      need(d.spec?.network?.enableDNSHostnames === true, "network.enableDNSHostnames: true");
      need(d.spec?.network?.publishNotReadyAddresses === true, "network.publishNotReadyAddresses: true");
      let world = 0;
      const first = d.spec.replicatedJobs[0];
      for (const rj of d.spec.replicatedJobs) {
        jobOf(rj.template.spec, `replicatedJob ${rj.name}`);
        const s = rj.template.spec;
        need(s.completionMode === "Indexed", `${rj.name}: completionMode: Indexed`);
        world += rj.replicas * s.completions;
        const e = env(s.template.spec.containers[0]);
        need(e.JCOMM_K8S_JOB_INDEX?.valueFrom?.fieldRef?.fieldPath
          === "metadata.annotations['jobset.sigs.k8s.io/job-global-index']",
          `${rj.name}: JCOMM_K8S_JOB_INDEX from the job-global-index annotation`);
        need(Number(e.JCOMM_K8S_PODS_PER_JOB?.value) === s.completions, `${rj.name}: JCOMM_K8S_PODS_PER_JOB = completions`);
      }
      const e = env(first.template.spec.template.spec.containers[0]);
      need(Number(e.WORLD_SIZE?.value) === world, `WORLD_SIZE must be ${world} (every job's pods)`);
      need(e.MASTER_ADDR?.value === `${d.metadata.name}-${first.name}-0-0.${d.metadata.name}`,
        `MASTER_ADDR must be ${d.metadata.name}-${first.name}-0-0.${d.metadata.name}`);
      break;
    }
    case "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet": {
      const t = d.spec.leaderWorkerTemplate;
      need(Number.isInteger(t.size) && t.size >= 1, "leaderWorkerTemplate.size");
      podOf(t.workerTemplate, "workerTemplate");
      if (t.leaderTemplate) podOf(t.leaderTemplate, "leaderTemplate");
      const e = env(t.workerTemplate.spec.containers[0]);
      need(!e.RANK && !e.MASTER_ADDR && !e.WORLD_SIZE, "no RANK, MASTER_ADDR or WORLD_SIZE: LWS_* give them");
      break;
    }
    case "kubeflow.org/v1 PyTorchJob": {
      const r = d.spec.pytorchReplicaSpecs;
      need(r.Master?.replicas === 1, "one Master replica (rank 0, MASTER_ADDR)");
      need(String(d.spec.nprocPerNode ?? "1") === "1", "nprocPerNode 1: one rank per pod (or start bin/commrun)");
      for (const [name, spec] of Object.entries(r)) {
        podOf(spec.template, `${name} template`);
        need(spec.template.spec.containers[0].name === "pytorch", `${name}: the container must be named pytorch`);
      }
      break;
    }
    default:
      problems.push(`${d.apiVersion} ${d.kind}: not a kind this check knows`);
  }
}
