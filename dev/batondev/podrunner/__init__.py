r"""The local pod runner: a stand-in kubelet for dev and test tooling only.

There is no kubelet or container runtime on the machines that run Baton's tests and demo,
so nothing would ever run the Pods that kube-controller-manager's StatefulSet controller
creates. ``dev/podrunner`` fills that gap with real processes and the real API server:

* it registers a Node (tainted, so kube-scheduler leaves other people's Pods alone, unless
  ``--untainted``), heartbeats it through a Lease, binds the Pods it was told to run
  (``--namespace``, ``--selector``, ``--all``; or lets kube-scheduler bind with
  ``--scheduler``) and creates a PersistentVolume per claim they use;
* it runs each container's ``command`` + ``args`` as a local process (the image is ignored;
  ``--image-env KEY=VALUE`` stands in for its ENV; see ``--runtime`` below for the image)
  with the Pod's env resolved as the kubelet would (downward API, Secrets, ConfigMaps,
  ``$(VAR)`` expansion), ``baton`` from the project's virtualenv first on ``PATH``;
* volumes are local directories (``volumes``), ports are remapped per Pod (``portmap``),
  and every env value or argument that names a mount path or a container port is rewritten
  to the local directory or port (``rewrite``);
* it reports Pod status from the processes and their probes (``status``, ``probes``),
  restarts containers per ``restartPolicy`` with back-off, and on deletion stops the
  processes (SIGTERM, grace period, SIGKILL) before deleting the Pod for good.

Usage (after ``dev/stack up``)::

    dev/podrunner run -n my-ns                      # foreground, Pods of one namespace
    dev/podrunner start -l app.kubernetes.io/managed-by=baton-operator   # detached
    dev/podrunner stop                              # its processes end, its Node goes
    kubectl get pod app-0 -o jsonpath='{.metadata.annotations.podrunner\.baton\.dev/ports}'

Tests use ``harness.running(namespace)``: a runner with a Node of its own per test. A
container's pid is in its status (``containerID: podrunner://<pid>``); its log is
``~/.cache/baton/run/podrunner/<namespace>/<pod>/<container>.log``.

By default it is not a container runtime: no isolation, no image, no resource limits. It is
good enough that the operator, the StatefulSet controller and the tests see Pods that behave
like Pods: they start, become Ready, crash, restart, keep their volume and go away.

``--runtime runc`` (or ``crun``; env ``BATON_PODRUNNER_RUNTIME``) runs each container from
its image instead (``ocirun``, ``ocispec``): the image built by ``dev/image`` and named in
the Pod, its rootfs read-only, the securityContext's user, capabilities and privileges,
volumes mounted at their mountPaths, the host's network with the same remapped ports.
"""
