#!/bin/sh
#SBATCH --gpus=h100:2 --cpus-per-gpu=4 --mem-per-gpu=10G --time=UNLIMITED
#SBATCH --gres=gpu:1,license:2 --nodes=1-3 --part=batch --frobnicate 3 --n=1
exec ./serve
