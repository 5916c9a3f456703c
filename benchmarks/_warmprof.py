import time, sys
t=time.perf_counter(); import torch; print("import torch %.2f" % (time.perf_counter()-t))
t=time.perf_counter()
import runner.execution.worker_loop  # noqa
print("runner imports %.2f" % (time.perf_counter()-t))
from runner.execution import environment as e
for name, fn in [("ctx", lambda: (torch.ones(64,64,device='cuda'), torch.cuda.synchronize())),
                 ("cublas", lambda: ((torch.ones(64,64,device='cuda').bfloat16() @ torch.ones(64,64,device='cuda').bfloat16()), torch.cuda.synchronize())),
                 ("environment", lambda: e.environment("cuda:0")), ("gpu_state", lambda: e.gpu_state("cuda:0")),
                 ("git", e.git_provenance), ("clock_reader", lambda: e.sm_clock_reader("cuda:0"))]:
    t=time.perf_counter(); fn(); print(name, "%.3f" % (time.perf_counter()-t))
from runner.timing.clock_probe import clock_probe
t=time.perf_counter(); p = clock_probe(torch.device("cuda:0")); s = p.stamps(2); p.record(s,0); p.record(s,1); torch.cuda.synchronize(); print("clock_probe (triton) %.3f" % (time.perf_counter()-t))
