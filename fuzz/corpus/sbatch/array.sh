#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --gres=gpu:2 --time=00:05:00 --array=0-199%8
#SBATCH --mail-type=END --mail-user=me@example.org
#SBATCH --output=slurm-%A_%a.out
python sweep.py --index "$GANTRY_ARRAY_INDEX"
