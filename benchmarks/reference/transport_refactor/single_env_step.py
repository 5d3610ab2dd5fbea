"""Single-env SampleCurriculumTask: env steps/s of HazardGrid with the wrapper vs without (paired)."""
import time, gymnasium as gym, numpy as np
import gymcurric
from gymcurric.tasks import Curriculum, FixedTaskSpace
from gymcurric.wrappers import SampleCurriculumTask

def run(env, n):
    env.reset(seed=0); a = env.action_space; a.seed(0)
    acts = [a.sample() for _ in range(n)]
    t = time.perf_counter()
    for x in acts:
        _, _, te, tr, _ = env.step(x)
        if te or tr: env.reset()
    return n / (time.perf_counter() - t)

space = FixedTaskSpace([{"num_hazards": k, "size": 7} for k in range(8)])
ratios = []
for rep in range(7):
    plain = gym.make("gymcurric/HazardGrid-v0", size=7)
    wrapped = SampleCurriculumTask(gym.make("gymcurric/HazardGrid-v0", size=7), Curriculum(space, seed=rep))
    p = run(plain, 20000); w = run(wrapped, 20000)
    ratios.append(w / p)
print("wrapped/plain steps/s per repeat:", " ".join(f"{r:.3f}" for r in ratios))
print(f"median {np.median(ratios):.3f}")
