# Flow-size distribution of small background flows (RPCs, metadata and
# storage reads next to a training job): SIZE_BYTES CUMULATIVE_PROBABILITY,
# linear between points. Mean about 98 KB.
1000      0.10
4000      0.35
16000     0.60
64000     0.80
256000    0.92
1000000   0.98
2000000   1.00
