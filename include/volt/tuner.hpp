// volt/tuner: the batch-size finder (Lightning's Tuner.scale_batch_size).
#pragma once
