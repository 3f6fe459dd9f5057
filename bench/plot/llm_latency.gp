# Decode-step latency vs KV-cache length, one panel per configuration, one line per system
# (median, with a bar from p10 to p90), from the data file `mixrt bench llm --table FILE` writes.
#
#   gnuplot -e "data='build/bench-llm.dat'; out='bench/llm_latency.png'" bench/plot/llm_latency.gp
#
# Block 0 of the file is the tiny configuration, block 1 the small one; columns: past, then
# median p10 p90 of mixrt hybrid, mixrt all-dynamic, the mixrt reference interpreter and ONNX
# Runtime, in microseconds ("?" marks a system that was not measured). The tiny panel also draws
# the issue's target for the hybrid, 0.2 x ONNX Runtime's median (small's target is 1.0 x, the
# ONNX Runtime line itself).
if (!exists("data")) data = 'build/bench-llm.dat'
if (!exists("out")) out = 'bench/llm_latency.png'

set terminal pngcairo size 1400,560 font "sans,11"
set output out
set datafile missing "?"
set logscale xy 2
set xtics (16, 32, 64, 128, 256, 512)
set ytics nomirror
set format y "%g"
set grid xtics ytics mytics lc rgb "#dddddd"
set key top left box opaque
set xlabel "past length (tokens in the KV cache)"
set ylabel "decode step latency, microseconds (median; bars p10-p90)"
set offsets graph 0.05, graph 0.05, 0, 0

set style line 1 lc rgb "#1b9e77" lw 2 pt 7 ps 1.2
set style line 2 lc rgb "#7570b3" lw 2 pt 5 ps 1.1
set style line 3 lc rgb "#999999" lw 2 pt 9 ps 1.2
set style line 4 lc rgb "#d95f02" lw 2 pt 11 ps 1.2

set multiplot layout 1,2 title "mixrt bench llm: Llama-style decode step on the CPU, 1 thread"
set title "tiny: 2 layers, hidden 64, 4 heads, vocab 128"
plot data index 0 using 1:2:3:4 with yerrorlines ls 1 title "mixrt hybrid", \
     ''   index 0 using 1:5:6:7 with yerrorlines ls 2 title "mixrt all-dynamic", \
     ''   index 0 using 1:8:9:10 with yerrorlines ls 3 title "mixrt reference interpreter", \
     ''   index 0 using 1:11:12:13 with yerrorlines ls 4 title "ONNX Runtime (Node binding)", \
     ''   index 0 using 1:($11*0.2) with lines lc rgb "#d95f02" lw 1 dt 2 title "target: 0.2 x ONNX Runtime"
set title "small: 4 layers, hidden 256, 4 heads of 64, ffn 688, vocab 1000"
plot data index 1 using 1:2:3:4 with yerrorlines ls 1 title "mixrt hybrid", \
     ''   index 1 using 1:5:6:7 with yerrorlines ls 2 title "mixrt all-dynamic", \
     ''   index 1 using 1:8:9:10 with yerrorlines ls 3 title "mixrt reference interpreter", \
     ''   index 1 using 1:11:12:13 with yerrorlines ls 4 title "ONNX Runtime (Node binding)"
unset multiplot
