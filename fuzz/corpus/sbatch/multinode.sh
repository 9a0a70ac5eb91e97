#!/bin/bash
#SBATCH -J ddp -p gpu,debug -A lab
#SBATCH -N 2 --ntasks-per-node=4
#SBATCH --gpus-per-node=a100:4
#SBATCH -c 8 --mem=256G
#SBATCH -t 1-12:00
#SBATCH --signal=B:USR1@120 --requeue --exclusive

srun torchrun train.py
#SBATCH --time=5
